package retentiontest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/syncbuf"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// testFailedStartNeverRuns: a Start whose caller goes away at any of its
// writes, even when the cleanup that follows fails too, returns an error,
// and the job it began never runs: no row is deleted, and the job (if left)
// ends failed and frees its image type for the next purge.
func testFailedStartNeverRuns(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		for _, cleanupFails := range []bool{false, true} {
			for cancelAt := 1; cancelAt <= 4; cancelAt++ {
				t.Run(fmt.Sprintf("cancelled at write %d, cleanup fails %t", cancelAt, cleanupFails), func(t *testing.T) {
					clock := &offsetClock{}
					opts := quickOptions()
					opts.Now = clock.Now
					f := ts.open(t, opts)
					f.Seed(t, 1)
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					var mu sync.Mutex
					starting, writes := true, 0
					f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, _ []store.Key) error {
						mu.Lock()
						defer mu.Unlock()
						if !starting || table != retention.DefaultJobsTable {
							return nil
						}
						if writes++; writes == cancelAt {
							cancel()
						}
						if cleanupFails && ctx.Err() != nil && op == "delete" {
							return errors.New("injected: store unavailable")
						}
						return nil
					}})
					kinds := []images.Kind{images.Single}
					_, err := f.Engine.Start(ctx, retention.StartRequest{Kinds: kinds, Cutoff: cutoff})
					mu.Lock()
					starting = false
					mu.Unlock()
					if err == nil {
						if ctx.Err() == nil {
							t.Fatalf("Start made fewer than %d writes", cancelAt)
						}
						return // cancelled after the job was confirmed: it is started for good
					}
					f.Run(t)
					clock.advance(5 * time.Minute) // past any Start, so a job left behind is given up
					deadline := time.Now().Add(20 * time.Second)
					for {
						jobs, _, err := f.Engine.List(t.Context(), 10, nil)
						if err != nil {
							t.Fatal(err)
						}
						ended := true
						for _, j := range jobs {
							if j.State == retention.Succeeded || j.Totals() != (retention.Counts{}) {
								t.Fatalf("the job of a failed Start ran: %s %+v", j.State, j.Totals())
							}
							ended = ended && j.State == retention.Failed
						}
						if ended {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("the job of a failed Start is still %s after 20s", jobs[0].State)
						}
						time.Sleep(10 * time.Millisecond)
					}
					want := Census{PrimaryOld: expiredPerCamera, PrimaryNew: keptPerCamera, IndexOld: expiredPerCamera, IndexNew: keptPerCamera}
					if got := f.Census(t, images.Single, base.Add(2*time.Minute)); got != want {
						t.Fatalf("after a failed Start: %+v, want every row kept %+v", got, want)
					}
					j := f.Purge(t, retention.StartRequest{Kinds: kinds, Cutoff: cutoff})
					wantCounts(t, "the next purge", j.Totals(), retention.Counts{DevicesTotal: 1, DevicesDone: 1,
						MetadataRows: expiredPerCamera, IndexRows: expiredPerCamera})
				})
			}
		}
	})
}

// testFailedCleanupIsLogged: when the store refuses every delete of the
// jobs table, a failed Start cannot remove its job, and the engine cannot
// drop the job's marker once it has given the job up; neither failure is
// swallowed: each is logged with the job's id.
func testFailedCleanupIsLogged(t *testing.T, ts *suite) {
	clock := &offsetClock{}
	logged := &syncbuf.Buffer{}
	opts := quickOptions()
	opts.Now = clock.Now
	opts.Logger = slog.New(slog.NewTextHandler(logged, nil))
	f := ts.open(t, opts)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var writes atomic.Int32
	f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, _ []store.Key) error {
		if table != retention.DefaultJobsTable {
			return nil
		}
		if writes.Add(1) == 3 {
			cancel() // at the locks
		}
		if op == "delete" {
			return errors.New("injected: store unavailable")
		}
		return nil
	}})
	if _, err := f.Engine.Start(ctx, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff}); err == nil {
		t.Fatal("Start succeeded though its caller went away before the end")
	}
	jobs, _, err := f.Engine.List(t.Context(), 10, nil)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after a Start whose cleanup failed: %d, %v; want its job left", len(jobs), err)
	}
	id := jobs[0].ID
	if !loggedLine(logged.String(), "removing a job that could not start failed", "job="+id, "injected") {
		t.Errorf("log %q; want the failed removal of job %s", logged.String(), id)
	}
	f.Run(t)
	clock.advance(5 * time.Minute)
	deadline := time.Now().Add(20 * time.Second)
	for !loggedLine(logged.String(), "dropping the marker of an ended job failed", "job="+id, "injected") {
		if time.Now().After(deadline) {
			t.Fatalf("log %q; want the failed drop of job %s's marker", logged.String(), id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if j, err := f.Engine.Get(t.Context(), id); err != nil || j.State != retention.Failed {
		t.Fatalf("the given-up job: %+v, %v; want it failed", j, err)
	}
}

// loggedLine reports whether one line of logs holds every part.
func loggedLine(logs string, parts ...string) bool {
	for line := range strings.Lines(logs) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return true
		}
	}
	return false
}
