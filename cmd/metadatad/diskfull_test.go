package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server"
)

// smallDiskBytes is the size of the filesystem the disk-full tests fill.
const smallDiskBytes = 20 << 20

// mountSmallDisk mounts a tmpfs of smallDiskBytes for the test, unmounted
// when it ends: a real filesystem that really fills, so the engine meets
// the ENOSPC of a full disk. Mounting needs root (or CAP_SYS_ADMIN); without
// it the test skips, except under CI=true, where it fails.
func mountSmallDisk(t *testing.T) string {
	t.Helper()
	return mountDisk(t, smallDiskBytes)
}

// mountDisk is mountSmallDisk for a tmpfs of size bytes.
func mountDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a tmpfs under CI=true: %v", err)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// writeBallast fills size bytes of dir's filesystem with a file the test
// deletes to free space.
func writeBallast(t *testing.T, dir string, size int) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// filler creates images with incompressible attributes, each under a
// fresh capture minute, and remembers which were acknowledged.
type filler struct {
	client metadatav1.SingleImageMetadataServiceClient
	base   time.Time
	next   int
	acked  []time.Time
}

// create makes one create call bounded by a deadline, so that a server
// whose writes hang fails the test instead of holding it.
func (f *filler) create(t *testing.T) error {
	t.Helper()
	payload := make([]byte, 8<<10)
	_, _ = rand.Read(payload)
	at := f.base.Add(time.Duration(f.next) * time.Minute)
	f.next++
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := f.client.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{
		Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-1", CapturedAt: timestamppb.New(at),
			Attributes: map[string]string{"noise": hex.EncodeToString(payload)}}})
	if err == nil {
		f.acked = append(f.acked, at)
	}
	return err
}

// fill creates until a create fails and returns that failure.
func (f *filler) fill(t *testing.T) error {
	t.Helper()
	for range smallDiskBytes / (8 << 10) * 4 {
		if err := f.create(t); err != nil {
			return err
		}
	}
	t.Fatalf("%d creates of 16 KiB fit on a %d-byte disk", f.next, smallDiskBytes)
	return nil
}

// requireAllAcknowledged lists cam-1 and finds every acknowledged capture,
// in pages that stay under gRPC's 4 MiB message limit (16 KiB an image).
func requireAllAcknowledged(t *testing.T, client metadatav1.SingleImageMetadataServiceClient, acked []time.Time) {
	t.Helper()
	stored := map[time.Time]bool{}
	token := ""
	for {
		resp, err := client.ListSingleImageMetadata(t.Context(), &metadatav1.ListSingleImageMetadataRequest{CameraId: "cam-1", PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatalf("list after restart: %v", err)
		}
		for _, m := range resp.GetMetadata() {
			stored[m.GetCapturedAt().AsTime()] = true
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	var lost int
	for _, at := range acked {
		if !stored[at] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged creates lost after restart", lost, len(acked))
	}
}

func healthOf(t *testing.T, d *daemon, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := healthpb.NewHealthClient(d.conn(t)).Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health of %q: %v", service, err)
	}
	return resp.GetStatus()
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, func() error {
		if !cond() {
			return errors.New(what)
		}
		return nil
	})
}

// TestFullDiskRefusesWritesKeepsReadsAndRecovers fills a small disk through
// the daemon's free-space guard: writes are refused with RESOURCE_EXHAUSTED
// before the engine meets ENOSPC, health reports writes NOT_SERVING while
// the server and reads go on, freeing space brings writes back by itself,
// and after a restart every acknowledged create is there.
func TestFullDiskRefusesWritesKeepsReadsAndRecovers(t *testing.T) {
	disk := mountSmallDisk(t)
	ballast := writeBallast(t, disk, 6<<20)
	dataDir := filepath.Join(disk, "data")
	args := []string{"-min-free-mib", "5", "-health-interval", "50ms", "-memtable-size", smallDiskMemTable}
	d := startDaemon(t, dataDir, args...)
	f := &filler{client: d.client(t), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	requireCode(t, f.fill(t), codes.ResourceExhausted)
	t.Logf("%d creates acknowledged before the guard refused", len(f.acked))

	eventually(t, "writes health NOT_SERVING", func() bool {
		return healthOf(t, d, server.WritesHealthService) == healthpb.HealthCheckResponse_NOT_SERVING
	})
	for _, service := range []string{"", "metadata.v1.SingleImageMetadataService"} {
		if got := healthOf(t, d, service); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q is %v while only writes are refused", service, got)
		}
	}
	latest, err := f.client.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
	if err != nil {
		t.Fatalf("read with the disk full: %v", err)
	}
	if got := latest.GetMetadata().GetCapturedAt().AsTime(); !got.Equal(f.acked[len(f.acked)-1]) {
		t.Fatalf("latest image captured at %s, want the last acknowledged %s", got, f.acked[len(f.acked)-1])
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	eventually(t, "writes accepted again after freeing space", func() bool { return f.create(t) == nil })
	eventually(t, "writes health SERVING", func() bool {
		return healthOf(t, d, server.WritesHealthService) == healthpb.HealthCheckResponse_SERVING
	})
	stop(t, d)

	d = startDaemon(t, dataDir, args...)
	requireAllAcknowledged(t, d.client(t), f.acked)
	stop(t, d)
}

// TestEngineFatalErrorStopsTheProcess fills a small disk with the guard off,
// so the engine itself meets ENOSPC in a commit: the daemon must stop at
// once (fail-stop) rather than recover the engine's panic inside the call
// and go on acknowledging writes, and after space is freed a restart finds
// every acknowledged create.
func TestEngineFatalErrorStopsTheProcess(t *testing.T) {
	disk := mountSmallDisk(t)
	ballast := writeBallast(t, disk, 4<<20)
	dataDir := filepath.Join(disk, "data")
	d := startDaemon(t, dataDir, "-min-free-mib", "0", "-memtable-size", smallDiskMemTable)
	f := &filler{client: d.client(t), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	err := f.fill(t)
	requireFatalStop(t, d, f, err, "the engine's fatal error")
	var logged int
	for line := range d.logs {
		if strings.Contains(line, "storage engine failed") {
			logged++
		}
	}
	if logged != 1 {
		t.Errorf("%d log lines say why the daemon stopped, want 1", logged)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, dataDir, "-min-free-mib", "0", "-memtable-size", smallDiskMemTable)
	requireAllAcknowledged(t, d.client(t), f.acked)
	stop(t, d)
}

// TestFullDiskWithTheGuardOffStopsTheProcess fills a disk with the guard
// off through a running store, whose write-ahead log files the engine
// recycles: the log goes on being written while the flushes of full
// memtables fail, and the engine retries them at once and without end. The
// daemon must report writes NOT_SERVING while they fail, then stop with
// status 70 and one line, not hang every write with a log line per retry;
// on a larger disk a restart finds every acknowledged create. Which the
// engine meets first, a flush or a log write that fails, depends on timing;
// both must end the same way.
func TestFullDiskWithTheGuardOffStopsTheProcess(t *testing.T) {
	t.Parallel() // independent: daemons, data directories and ports of its own
	const diskBytes = 64 << 20
	disk := mountDisk(t, diskBytes)
	dataDir := filepath.Join(disk, "data")
	args := []string{"-min-free-mib", "0", "-health-interval", "50ms", "-memtable-size", "2MiB"}
	d := startDaemon(t, dataDir, args...)

	// Every line is counted: startDaemon's channel drops lines nobody reads.
	counts := map[string]int{}
	var causes []string
	logged := make(chan struct{})
	logs := d.logs // d is the restarted daemon by the end
	go func() {
		defer close(logged)
		for line := range logs {
			for _, s := range []string{"storage engine failed", "background error", "a flush failed", "no space left on device"} {
				if strings.Contains(line, s) {
					counts[s]++
				}
			}
			if strings.Contains(line, "storage engine failed") {
				causes = append(causes, line)
			}
		}
	}()
	// notServing is closed once health says writes are NOT_SERVING.
	notServing := make(chan struct{})
	health := healthpb.NewHealthClient(d.conn(t))
	go func() {
		for {
			resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: server.WritesHealthService})
			if err != nil {
				return // the daemon stopped
			}
			if resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
				close(notServing)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	f := &filler{client: d.client(t), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var err error
	for limit := diskBytes / (8 << 10) * 4; err == nil; {
		if f.next >= limit {
			t.Fatalf("%d creates of 16 KiB fit on a %d-byte disk", f.next, diskBytes)
		}
		err = f.create(t)
	}
	requireFatalStop(t, d, f, err, "a create failed on the full disk")
	<-logged
	t.Logf("log lines: %v; the stop: %v", counts, causes)
	if counts["storage engine failed"] != 1 {
		t.Errorf("%d lines say the storage engine failed, want 1", counts["storage engine failed"])
	}
	// Without the flush watch the engine logs a line per failed retry,
	// thousands before a client gives up. With it: a line per streak of
	// failed flushes (a compaction may free room for one to succeed in
	// between), the stop, and the calls that failed meanwhile.
	if n := counts["no space left on device"]; n > 30 {
		t.Errorf("%d log lines report the full disk, want a few", n)
	}
	if len(causes) == 1 && strings.Contains(causes[0], "flushes have failed") {
		select {
		case <-notServing:
		default:
			t.Error("health never said writes were NOT_SERVING while flushes failed")
		}
	}

	if err := unix.Mount("tmpfs", disk, "tmpfs", unix.MS_REMOUNT, "size="+strconv.Itoa(2*diskBytes)); err != nil {
		t.Fatalf("remount the disk larger: %v", err)
	}
	d = startDaemon(t, dataDir, args...)
	requireAllAcknowledged(t, d.client(t), f.acked)
	stop(t, d)
}

// smallDiskMemTable fits the memtable to the 20 MB disk: each write-ahead
// log file reserves 1.1 times the memtable size, so the default (64 MiB)
// would not open on it at all, and a free-space floor must exceed one log
// file's reservation (the guard test uses 5 MiB).
const smallDiskMemTable = "4MiB"

// exitFatalStatus is the status the daemon exits with after a fatal engine error.
const exitFatalStatus = 70

func requireCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
}

// requireFatalStop checks that the create that ended f's run failed as a
// stopped process answers, and that the daemon exits with the fatal status
// within a bounded wait; what names the cause in its failure.
func requireFatalStop(t *testing.T, d *daemon, f *filler, err error, what string) {
	t.Helper()
	t.Logf("%d creates acknowledged, then: %v", len(f.acked), err)
	if code := status.Code(err); code != codes.Unavailable {
		t.Errorf("create on a full disk failed with %v, want UNAVAILABLE from a stopped process", code)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitFatalStatus {
			t.Fatalf("daemon exit: %v, want status %d", err, exitFatalStatus)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon still running 30 s after %s", what)
	}
}

// TestFullDiskLetsThroughWhatStopsDeletion fills a small disk through the
// free-space guard, whose purges go on deleting: the calls that stop or
// limit deletion must go on too. A purge is cancelled and a legal hold
// placed, changed and released while creates are refused.
func TestFullDiskLetsThroughWhatStopsDeletion(t *testing.T) {
	disk := mountSmallDisk(t)
	writeBallast(t, disk, 6<<20)
	d := startDaemon(t, filepath.Join(disk, "data"), "-min-free-mib", "5", "-memtable-size", smallDiskMemTable)
	f := &filler{client: d.client(t), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	requireCode(t, f.fill(t), codes.ResourceExhausted)
	retention := metadatav1.NewRetentionServiceClient(d.conn(t))

	// A purge of every image, paced to a row a second, so that it still
	// runs when cancelled.
	started, err := retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_SINGLE},
		Cutoff:     &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}, RowsPerSecond: 1})
	if err != nil {
		t.Fatalf("start a purge on the full disk: %v", err)
	}
	id := started.GetJob().GetJobId()
	if _, err := retention.CancelPurge(t.Context(), &metadatav1.CancelPurgeRequest{JobId: id}); err != nil {
		t.Errorf("cancel the purge on the full disk: %v", err)
	}
	created, err := retention.CreateLegalHold(t.Context(), &metadatav1.CreateLegalHoldRequest{
		LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-1", Reason: "case 1"}})
	if err != nil {
		t.Fatalf("place a legal hold on the full disk: %v", err)
	}
	updated, err := retention.UpdateLegalHold(t.Context(), &metadatav1.UpdateLegalHoldRequest{
		LegalHold:  &metadatav1.LegalHold{Name: "legalHolds/cam-1", Reason: "case 2", Etag: created.GetLegalHold().GetEtag()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"reason"}}})
	if err != nil {
		t.Fatalf("change a legal hold on the full disk: %v", err)
	}
	if got := updated.GetLegalHold().GetReason(); got != "case 2" {
		t.Errorf("updated hold's reason %q, want %q", got, "case 2")
	}
	if _, err := retention.DeleteLegalHold(t.Context(), &metadatav1.DeleteLegalHoldRequest{Name: "legalHolds/cam-1"}); err != nil {
		t.Errorf("release a legal hold on the full disk: %v", err)
	}
	// The guard still refused writes that add data all along.
	requireCode(t, f.create(t), codes.ResourceExhausted)

	eventually(t, "the purge ends cancelled", func() bool {
		resp, err := retention.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: id})
		if err != nil {
			t.Fatalf("get the purge: %v", err)
		}
		return resp.GetJob().GetState() == metadatav1.PurgeState_PURGE_STATE_CANCELLED
	})
	stop(t, d)
}
