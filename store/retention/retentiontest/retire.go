package retentiontest

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// testOldJobsAreRetired: once the configured age has passed since a job
// ended, RetireJobs deletes its record and the tasks its end failed to
// delete; younger jobs stay.
func testOldJobsAreRetired(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		clock := &offsetClock{}
		opts := quickOptions()
		opts.Now = clock.Now
		opts.JobRetention = 48 * time.Hour
		f := ts.open(t, opts)
		f.Seed(t, cameras)
		var keepTasks atomic.Bool
		keepTasks.Store(true)
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, _ []store.Key) error {
			if table == queue.DefaultTasksTable && op == "batch-delete" && keepTasks.Load() {
				return errors.New("injected: task deletes fail")
			}
			return nil
		}})
		f.Run(t)
		purged := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		dry := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Pano}, Cutoff: cutoff, DryRun: true})
		tasks, err := f.Base.Table(t.Context(), queue.DefaultTasksTable)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(partitionRows(t, tasks, purged.ID)); n == 0 {
			t.Fatal("the purge's tasks were deleted at its end; the test needs them left")
		}
		keepTasks.Store(false)

		clock.advance(24 * time.Hour)
		if n, err := f.Engine.RetireJobs(t.Context()); err != nil || n != 0 {
			t.Fatalf("a day After: retired %d, %v; want none", n, err)
		}
		clock.advance(25 * time.Hour)
		young := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Pano}, Cutoff: cutoff, DryRun: true})
		if n, err := f.Engine.RetireJobs(t.Context()); err != nil || n != 2 {
			t.Fatalf("49 hours After: retired %d, %v; want the 2 old jobs", n, err)
		}
		for _, id := range []string{purged.ID, dry.ID} {
			if _, err := f.Engine.Get(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("retired job %s: %v, want not found", id, err)
			}
		}
		if n := len(partitionRows(t, tasks, purged.ID)); n != 0 {
			t.Errorf("%d tasks of the retired job left", n)
		}
		if _, err := f.Engine.Get(t.Context(), young.ID); err != nil {
			t.Errorf("young job: %v", err)
		}
		if jobs, _, err := f.Engine.List(t.Context(), 10, nil); err != nil || len(jobs) != 1 {
			t.Errorf("jobs left: %d, %v; want the young one", len(jobs), err)
		}
	})
}

// testOldDeadLettersAreRetired: a task message dead-lettered in the
// embedded store's queue table is kept as long as a job's record, then
// RetireJobs deletes it with the old jobs.
func testOldDeadLettersAreRetired(t *testing.T, ts *suite) {
	clock := &offsetClock{}
	opts := quickOptions()
	opts.Now = clock.Now
	opts.JobRetention = 48 * time.Hour
	f := ts.open(t, opts)
	f.Run(t)
	// An unreadable message is dead-lettered at its first delivery.
	if err := engineQueue(t, f).Send(t.Context(), []byte("not a task")); err != nil {
		t.Fatal(err)
	}
	table, err := f.Base.Table(t.Context(), queue.DefaultQueueTable)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for len(partitionRows(t, table, "poison")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the unreadable message was not dead-lettered in %v", patience)
		}
		time.Sleep(5 * time.Millisecond)
	}

	clock.advance(47 * time.Hour)
	if _, err := f.Engine.RetireJobs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(partitionRows(t, table, "poison")); n != 1 {
		t.Fatalf("47 hours After: %d dead letters, want the one kept", n)
	}
	clock.advance(2 * time.Hour)
	if _, err := f.Engine.RetireJobs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(partitionRows(t, table, "poison")); n != 0 {
		t.Fatalf("49 hours After: %d dead letters, want none", n)
	}
}
