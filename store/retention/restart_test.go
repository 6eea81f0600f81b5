package retention_test

import (
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestRestartedEmbeddedEngineResumesAtOnce: the embedded store crashes while
// a task is in flight, hidden for the default two minutes. The restarted
// engine, the store's only user, releases the task at its start and
// finishes the purge long before the timeout would have passed.
func TestRestartedEmbeddedEngineResumesAtOnce(t *testing.T) {
	opts := quickOptions()
	opts.VisibilityTimeout = 0 // the default, 2 minutes
	opts.Exclusive = true
	f := newFixture(t, opts)
	f.seed(t, cameras)
	primary, _ := f.repo(images.Single).Tables()
	crash := &crashAfter{n: 1 << 30, fs: f.fs}
	f.openEngine(t, &hookedBackend{Backend: f.base, before: func(table, op string, keys []store.Key) error {
		if table == primary.Name() && op == "delete-ranges" {
			// A task is in flight; once planning has ended (a restart would
			// plan again, sending every task anew), die.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if jobs, _, err := f.engine.List(t.Context(), 1, nil); err == nil && len(jobs) == 1 && jobs[0].Kinds[0].Phase != "plan" {
					break
				}
			}
			crash.mu.Lock()
			crash.n = 0
			crash.mu.Unlock()
		}
		return crash.before(table, op, keys)
	}, after: crash.after})
	f.run(t)
	started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	waitCrashed(t, f, crash, started.ID)
	f.stop()
	crash.mu.Lock()
	crashed := crash.crashed
	crash.mu.Unlock()
	if crashed == nil {
		t.Fatal("the purge ended without reaching a delete")
	}

	restarted := f.reopen(t, crashed)
	restarted.run(t)
	begin := time.Now()
	j := restarted.await(t, started.ID) // fails after 30 s, far below the 2-minute timeout
	if j.State != retention.Succeeded {
		t.Fatalf("resumed purge: %s (%s)", j.State, j.Error)
	}
	wantCounts(t, "resumed purge", j.Totals(), expiredCounts(1))
	t.Logf("resumed and finished in %s", time.Since(begin))
}
