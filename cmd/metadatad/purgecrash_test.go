package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
)

var purgeKills = flag.Int("purge-kills", 10, "kill -9 points of TestPurgeKilledAtRandomPointsCompletesExactly")

// TestPurgeKilledAtRandomPointsCompletesExactly kills the daemon at
// -purge-kills random points of a purge, restarting it after each; the
// purge resumes and ends with exact counts, every image younger than the
// cutoff is still there, and the index matches the primary tables.
func TestPurgeKilledAtRandomPointsCompletesExactly(t *testing.T) {
	t.Parallel() // independent: daemons, data directories and ports of its own
	const (
		cameras = 40
		minutes = 100
		expired = 70 // minutes before the cutoff
	)
	cutoff := crashBase.Add(expired * time.Minute)
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	clients := newImageClients(d.conn(t))
	// The fixture in batches of a kind, each image as a create writes it:
	// the purge is the subject, and 12,000 creates one call each were most
	// of the test's time under -race.
	for _, kind := range images.Kinds {
		var imgs []written
		for m := range minutes {
			for c := range cameras {
				imgs = append(imgs, written{kind: kind, camera: fmt.Sprintf("purge-c%02d", c), at: crashBase.Add(time.Duration(m)*time.Minute + time.Duration(c)*time.Second)})
			}
		}
		if err := clients.seed(t.Context(), kind, imgs); err != nil {
			t.Fatal(err)
		}
	}

	started, err := metadatav1.NewRetentionServiceClient(d.conn(t)).StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(cutoff)}})
	if err != nil {
		t.Fatal(err)
	}
	jobID := started.GetJob().GetJobId()
	for kill := range *purgeKills {
		time.Sleep(time.Duration(rand.IntN(250)) * time.Millisecond)
		job := purgeState(t, d, jobID)
		if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = d.cmd.Wait()
		t.Logf("kill %d: purge %s, %d of %d metadata rows deleted", kill, job.GetState(), job.GetMetadataRowsDeleted(), cameras*expired*3)
		d = startDaemon(t, dataDir)
	}

	job := watchToEnd(t, d, jobID)
	want := int64(cameras * expired * len(images.Kinds))
	if job.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || job.GetMetadataRowsDeleted() != want ||
		job.GetIndexRowsDeleted() != want || job.GetDevicesTotal() != cameras*int64(len(images.Kinds)) || job.GetDevicesFailed() != 0 {
		t.Fatalf("purge after %d kills: %v; want SUCCEEDED with %d rows of each table deleted", *purgeKills, job, want)
	}
	clients = newImageClients(d.conn(t))
	for c := range cameras {
		for _, kind := range images.Kinds {
			got := clients.captured(t, kind, fmt.Sprintf("purge-c%02d", c))
			if len(got) != minutes-expired || got[len(got)-1].Before(cutoff) {
				t.Fatalf("%s images of camera %d after the purge: %d, oldest %v; want the %d at or after %v",
					kind, c, len(got), got[len(got)-1], minutes-expired, cutoff)
			}
		}
	}
	stop(t, d)
	requireIndexMatchesPrimary(t, dataDir, cutoff)
}

func purgeState(t *testing.T, d *daemon, jobID string) *metadatav1.PurgeJob {
	t.Helper()
	resp, err := metadatav1.NewRetentionServiceClient(d.conn(t)).GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: jobID})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetJob()
}

// watchToEnd follows a purge until its last snapshot.
func watchToEnd(t *testing.T, d *daemon, jobID string) *metadatav1.PurgeJob {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stream, err := metadatav1.NewRetentionServiceClient(d.conn(t)).WatchPurge(ctx, &metadatav1.WatchPurgeRequest{JobId: jobID})
	if err != nil {
		t.Fatal(err)
	}
	var last *metadatav1.PurgeJob
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return last
		}
		if err != nil {
			t.Fatalf("watching purge %s: %v (last %v)", jobID, err, last)
		}
		last = resp.GetJob()
	}
}
