package retention_test

import (
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestSlowTaskIsWorkedOnce: a task whose deletes take three times the
// queue's visibility timeout keeps its message hidden while it runs, so no
// other worker takes it up at the same time.
func TestSlowTaskIsWorkedOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		const visibility = time.Second // Azure's smallest
		opts := quickOptions()
		opts.VisibilityTimeout = visibility
		opts.GroupSize = 100 // one task
		opts.Workers = 4
		f := newFixture(t, opts)
		var mu sync.Mutex
		inFlight, most, deletes := 0, 0, 0
		primary, _ := f.repo(images.Single).Tables()
		f.openEngine(t, &hookedBackend{Backend: f.base, before: func(table, op string, _ []store.Key) error {
			if table != primary.Name() || (op != "delete-ranges" && op != "batch-delete") {
				return nil
			}
			mu.Lock()
			inFlight++
			deletes++
			most = max(most, inFlight)
			first := deletes == 1
			mu.Unlock()
			if first {
				time.Sleep(3 * visibility)
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			return nil
		}})
		f.seed(t, 2)
		f.run(t)
		j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if j.State != retention.Succeeded {
			t.Fatalf("purge: %s (%s)", j.State, j.Error)
		}
		wantCounts(t, "purge", j.Totals(), retention.Counts{DevicesTotal: 2, DevicesDone: 2,
			MetadataRows: 2 * expiredPerCamera, IndexRows: 2 * expiredPerCamera})
		mu.Lock()
		defer mu.Unlock()
		if most != 1 {
			t.Fatalf("%d workers deleted the task's rows at once, want 1", most)
		}
	})
}
