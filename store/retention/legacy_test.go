package retention_test

import (
	"fmt"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestJobLeftInTheSweepResumesAsTheJanitor: a job recorded by the release
// before the janitor, left in its sweep phase with a chunk announced, its
// workers having deleted the primary rows and left their index rows to the
// sweep, finishes on this release: the janitor deletes those index rows,
// the intent is dropped, and the index count is the primary rows'.
func TestJobLeftInTheSweepResumesAsTheJanitor(t *testing.T) {
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		f := newFixture(t, quickOptions())
		f.seed(t, cameras)
		// Not running: the job stays where the test leaves it.
		j, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		primary, _ := f.repo(images.Single).Tables()
		for c := range cameras {
			camera := fmt.Sprintf("cam-%03d", c)
			boundary := j.Boundary()
			for _, e := range partitionRows(t, primary, camera) {
				at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
				if err != nil {
					t.Fatal(err)
				}
				if at.Before(boundary) {
					if err := primary.Delete(t.Context(), camera, e.RowKey, ""); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if got := f.census(t, images.Single, j.Boundary()); got.primaryOld != 0 || got.indexOld != cameras*expiredPerCamera {
			t.Fatalf("the old release's work left %+v", got)
		}
		old := expiredCounts(1)
		old.IndexRows = 3 // its sweep's first chunks
		if err := retention.LeaveInSweep(t.Context(), f.engine, j.ID, old); err != nil {
			t.Fatal(err)
		}
		f.run(t)
		got := f.await(t, j.ID)
		if got.State != retention.Succeeded {
			t.Fatalf("state %s (%s)", got.State, got.Error)
		}
		wantCounts(t, "resumed job", got.Totals(), expiredCounts(1))
		if c := f.census(t, images.Single, j.Boundary()); c != (census{primaryNew: cameras * keptPerCamera, indexNew: cameras * keptPerCamera}) {
			t.Errorf("after the resumed job: %+v", c)
		}
	})
}
