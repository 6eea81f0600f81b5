package retentiontest

import (
	"testing"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// testCamerasBeyondThePlansMemory: with room for two camera ids, the plan
// splits the expired cameras into buckets, one scan each, and still plans
// each camera once: the counts are exact, devices included, and a dry run
// under the same bound agrees.
func testCamerasBeyondThePlansMemory(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.CameraMemory = 2 * (len("cam-000") + 64) // two cameras fit, a third does not
		f := ts.open(t, opts)
		f.Seed(t, cameras)
		f.Run(t)
		kinds := []images.Kind{images.Single, images.Pano}
		dry := f.Purge(t, retention.StartRequest{Kinds: kinds, Cutoff: cutoff, DryRun: true})
		wantCounts(t, "dry run", dry.Totals(), expiredCounts(2))
		j := f.Purge(t, retention.StartRequest{Kinds: kinds, Cutoff: cutoff})
		if j.State != retention.Succeeded {
			t.Fatalf("state %s (%s)", j.State, j.Error)
		}
		wantCounts(t, "purge", j.Totals(), expiredCounts(2))
		for _, p := range j.Kinds {
			if queue.PlanBuckets(p) < 2 {
				t.Errorf("%s planned in %d buckets; %d cameras cannot fit in one", p.Kind, queue.PlanBuckets(p), cameras)
			}
			got := f.Census(t, p.Kind, j.Boundary())
			if want := (Census{PrimaryNew: cameras * keptPerCamera, IndexNew: cameras * keptPerCamera}); got != want {
				t.Errorf("%s after purge: %+v, want %+v", p.Kind, got, want)
			}
		}
	})
}
