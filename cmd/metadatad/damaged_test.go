package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// seedDamageable writes images of ten cameras through the daemon and
// flushes them from the log into a table file, which the tests damage.
func seedDamageable(t *testing.T, dataDir string) {
	t.Helper()
	seedImages(t, dataDir)
	// The store keeps its write-ahead log in DATA_DIR/wal.
	db, err := pebbledb.Open(dataDir, &pebbledb.Options{Logger: quietPebble{}, WALDir: filepath.Join(dataDir, "wal")})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// seedImages writes images of ten cameras through a daemon on dataDir and
// stops it: they are in its write-ahead log.
func seedImages(t *testing.T, dataDir string) {
	t.Helper()
	d := startDaemon(t, dataDir)
	client := d.client(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200 {
		_, err := client.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: fmt.Sprintf("cam-%d", i%10), CapturedAt: timestamppb.New(base.Add(time.Duration(i) * time.Minute)),
				BlobUri: "https://blobs.example/" + strings.Repeat("x", 200)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	stop(t, d)
}

// damage writes 4 KiB of random bytes over the start of the data
// directory's last file (by name, so the newest) named prefix*suffix, and
// returns its name.
func damage(t *testing.T, dataDir, prefix, suffix string) string {
	t.Helper()
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), suffix) {
			name = e.Name()
		}
	}
	if name == "" {
		t.Fatalf("no %s*%s file in %s", prefix, suffix, dataDir)
	}
	noise := make([]byte, 4096)
	_, _ = rand.Read(noise)
	f, err := os.OpenFile(filepath.Join(dataDir, name), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(noise, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestDamagedTableFileFailsOnlyItsReads damages a table file of a stopped
// daemon: the daemon starts, reads of the damaged keys fail with DATA_LOSS
// (not INTERNAL, not a crash), the damage is logged once naming the file,
// and the rest of the data and new writes are served.
func TestDamagedTableFileFailsOnlyItsReads(t *testing.T) {
	dataDir := t.TempDir()
	seedDamageable(t, dataDir)
	file := damage(t, dataDir, "", ".sst")

	d := startDaemon(t, dataDir)
	client := d.client(t)
	codesSeen := map[codes.Code]int{}
	for range 3 {
		for c := range 10 {
			_, err := client.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: fmt.Sprintf("cam-%d", c)})
			codesSeen[status.Code(err)]++
		}
	}
	if codesSeen[codes.DataLoss] == 0 || len(codesSeen) > 2 || (len(codesSeen) == 2 && codesSeen[codes.OK] == 0) {
		t.Errorf("reads over a damaged file answered %v, want DATA_LOSS for the damaged keys and OK for the rest", codesSeen)
	}
	_, err := client.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
		Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-new", CapturedAt: timestamppb.New(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))}})
	if err != nil {
		t.Fatalf("create beside a damaged file: %v", err)
	}
	if _, err := client.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-new"}); err != nil {
		t.Fatalf("read of undamaged data: %v", err)
	}
	if got := healthOf(t, d, ""); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health %v beside a damaged file", got)
	}

	// Stop collects every log line; the damage is told once, with its file.
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var told int
	var stopped bool
	// The damage may be met while the daemon starts: the store reads its
	// flush marks, and they may sit in the damaged file.
	for line := range chainLines(d.startup, d.logs) {
		if strings.Contains(line, "damaged data file") {
			told++
			if !strings.Contains(line, file) {
				t.Errorf("damage log line does not name %s: %s", file, line)
			}
		}
		stopped = stopped || strings.Contains(line, "msg=stopped")
	}
	if told != 1 {
		t.Errorf("damage logged %d times, want once", told)
	}
	if err := d.cmd.Wait(); err != nil || !stopped {
		t.Errorf("daemon exit %v (clean stop logged: %v), want a clean stop", err, stopped)
	}
}

// TestDamagedManifestRefusesToStartWithOneMessage damages the file that
// lists the store's files: the daemon must not start, and must say so in one
// line naming the data directory, without a panic or a stack.
func TestDamagedManifestRefusesToStartWithOneMessage(t *testing.T) {
	dataDir := t.TempDir()
	seedDamageable(t, dataDir)
	damage(t, dataDir, "MANIFEST-", "")
	requireRefusedAsDamaged(t, dataDir)
}

// TestTruncatedTableFileRefusesToStart cuts a table file of a stopped
// daemon in half: the engine meets it at open, and the daemon refuses with
// the one damaged-directory message.
func TestTruncatedTableFileRefusesToStart(t *testing.T) {
	dataDir := t.TempDir()
	seedDamageable(t, dataDir)
	tables, _ := filepath.Glob(filepath.Join(dataDir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table file")
	}
	info, err := os.Stat(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(tables[0], info.Size()/2); err != nil {
		t.Fatal(err)
	}
	requireRefusedAsDamaged(t, dataDir)
}

// TestStoreWithoutManifestMarkerRefusesToStart deletes the MANIFEST marker
// and the flush mark record of a stopped daemon: the daemon must refuse,
// not start a new, empty store there (which would delete every table file
// as obsolete).
func TestStoreWithoutManifestMarkerRefusesToStart(t *testing.T) {
	dataDir := t.TempDir()
	seedDamageable(t, dataDir)
	markers, _ := filepath.Glob(filepath.Join(dataDir, "marker.manifest.*"))
	for _, name := range append(markers, filepath.Join(dataDir, "METADATAD-FLUSHED")) {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	tables, _ := filepath.Glob(filepath.Join(dataDir, "*.sst"))
	requireRefusedAsDamaged(t, dataDir)
	if after, _ := filepath.Glob(filepath.Join(dataDir, "*.sst")); len(after) != len(tables) || len(tables) == 0 {
		t.Errorf("table files %v before the refused start, %v after", tables, after)
	}
}

// TestMissingNewestLogRefusesToStart deletes the newest write-ahead log of
// a stopped daemon, which holds its last acknowledged creates: the daemon
// must refuse, not start without them.
func TestMissingNewestLogRefusesToStart(t *testing.T) {
	dataDir := t.TempDir()
	seedImages(t, dataDir)
	logs, _ := filepath.Glob(filepath.Join(dataDir, "wal", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no log in DATA_DIR/wal")
	}
	slices.Sort(logs)
	if err := os.Remove(logs[len(logs)-1]); err != nil {
		t.Fatal(err)
	}
	requireRefusedAsDamaged(t, dataDir)
}

// TestManifestCutShortRefusesToStart cuts the MANIFEST of a stopped daemon
// back to what it held after its first flush, as a bad disk or a copy cut
// off would: the flushes recorded after it are lost, and the daemon must
// refuse to start with one message, not serve without them.
func TestManifestCutShortRefusesToStart(t *testing.T) {
	dataDir := t.TempDir()
	// Small memtables flush every few hundred creates.
	d := startDaemon(t, dataDir, "-memtable-size", "256KiB")
	client := d.client(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	create := func(i int) {
		_, err := client.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: fmt.Sprintf("cam-%d", i%10), CapturedAt: timestamppb.New(base.Add(time.Duration(i) * time.Minute)),
				BlobUri: "https://blobs.example/" + strings.Repeat("x", 200)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var manifest string
	var cut int64
	for i := 0; ; i++ {
		if i == 20000 {
			t.Fatal("20,000 creates did not record three flushes")
		}
		create(i)
		if i%50 != 0 {
			continue
		}
		mark := flushMark(t, dataDir)
		if manifest == "" && mark > 0 {
			names, _ := filepath.Glob(filepath.Join(dataDir, "MANIFEST-*"))
			manifest = names[len(names)-1]
			info, err := os.Stat(manifest)
			if err != nil {
				t.Fatal(err)
			}
			cut = info.Size()
		}
		if manifest != "" && mark >= 4 {
			break
		}
	}
	stop(t, d)
	if err := os.Truncate(manifest, cut); err != nil {
		t.Fatal(err)
	}
	requireRefusedAsDamaged(t, dataDir)
}

// flushMark is the flush mark the store in dataDir has recorded, 0 for none.
func flushMark(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "METADATAD-FLUSHED"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	// The file holds the recorded mark, then the oldest kept.
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("flush mark file holds %q", b)
	}
	return n
}

// requireRefusedAsDamaged starts the daemon on dataDir and requires it to
// refuse: exit status 1, one message naming the damaged directory, no
// panic and no stack.
func requireRefusedAsDamaged(t *testing.T, dataDir string) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-listen", "127.0.0.1:0", "-data-dir", dataDir)
	cmd.Env = daemonEnviron()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("daemon on a damaged directory: %v, want exit status 1\n%s", err, out)
	}
	text := string(out)
	if strings.Contains(text, "panic") || strings.Contains(text, "goroutine ") {
		t.Errorf("output has a panic or a stack:\n%s", text)
	}
	if !strings.Contains(text, "is damaged") || !strings.Contains(text, dataDir) {
		t.Errorf("output does not say the data directory %s is damaged:\n%s", dataDir, text)
	}
	if len(text) > 2000 {
		t.Errorf("%d bytes of output, want one message:\n%s", len(text), text)
	}
}

// chainLines yields the lines of first, then those of rest until it closes.
func chainLines(first []string, rest <-chan string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, line := range first {
			if !yield(line) {
				return
			}
		}
		for line := range rest {
			if !yield(line) {
				return
			}
		}
	}
}

// quietPebble keeps the engine's messages out of the test output.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
