package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// TestStopWhilePurging stops the daemon, again and again, while a purge is
// working, its lease renewing and the built-in schedule starting purges:
// every goroutine that writes to the store must end before the store closes
// (the embedded engine panics on use after close), and each stop must be
// clean. Run with -race, the daemon process is raced too.
func TestStopWhilePurging(t *testing.T) {
	dataDir := t.TempDir()
	// Renewals every 5 ms and a schedule every 5 ms keep both busy at any
	// moment the stop may come.
	args := []string{"-retention-days", "1", "-retention-interval", "5ms", "-purge-lease", "15ms", "-log-level", "debug"}
	expired := time.Now().UTC().AddDate(0, 0, -10).Truncate(time.Minute)
	for cycle := range 3 {
		d := startDaemon(t, dataDir, args...)
		client := d.client(t)
		var g errgroup.Group
		g.SetLimit(8)
		for i := range 200 {
			g.Go(func() error {
				_, err := client.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
					Metadata: &metadatav1.SingleImageMetadata{CameraId: fmt.Sprintf("cam-%d-%d", cycle, i%50),
						CapturedAt: timestamppb.New(expired.Add(time.Duration(i) * time.Minute))}})
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		waitForLog(t, d, "purge started", "purge resumed")
		stop(t, d)
	}
}

// waitForLog reads the daemon's log until a line holds one of wants.
func waitForLog(t *testing.T, d *daemon, wants ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		select {
		case line, ok := <-d.logs:
			if !ok {
				t.Fatalf("daemon exited before logging any of %q", wants)
			}
			for _, want := range wants {
				if strings.Contains(line, want) {
					return
				}
			}
		case <-ctx.Done():
			t.Fatalf("no log line with any of %q in 30 s", wants)
		}
	}
}
