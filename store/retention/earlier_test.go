package retention_test

import (
	"strings"
	"testing"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/retentiontest"
)

// TestAJobOfAnEarlierReleaseEndsFailedAndIsRerun: a purge an earlier
// release left running (no driver named, in a phase of its own design,
// some of its rows deleted) is not resumed on progress this release does
// not know: it ends failed, saying to start it again, and the next purge
// deletes what it left, index rows of its deleted rows included.
func TestAJobOfAnEarlierReleaseEndsFailedAndIsRerun(t *testing.T) {
	forEachOf(t, func(t *testing.T, open func(*testing.T, retentiontest.Options) *fixture) {
		for _, phase := range []string{"work", "sweep"} {
			t.Run(phase, func(t *testing.T) { earlierReleaseRerun(t, open(t, quickOptions()), phase) })
		}
	}, pebbleHarness, pebbleQueueHarness, azureHarness)
}

func earlierReleaseRerun(t *testing.T, f *fixture, phase string) {
	f.Seed(t, cameras)
	// Not running: the job stays where the test leaves it.
	j, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	primary, _ := f.Repo(images.Single).Tables()
	for _, e := range partitionRows(t, primary, "cam-000") {
		if err := primary.Delete(t.Context(), "cam-000", e.RowKey, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := retention.LeaveAsEarlierRelease(t.Context(), f.Engine, j.ID, phase); err != nil {
		t.Fatal(err)
	}
	f.Run(t)
	got := f.Await(t, j.ID)
	if got.State != retention.Failed || !strings.Contains(got.Error, "earlier release") {
		t.Fatalf("left in %s: %s (%s); want failed, to be started again", phase, got.State, got.Error)
	}
	next, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Await(t, next.ID); got.State != retention.Succeeded {
		t.Fatalf("the next purge: %s (%s)", got.State, got.Error)
	}
	want := census{PrimaryNew: (cameras - 1) * keptPerCamera, IndexNew: cameras * keptPerCamera}
	if c := f.Census(t, images.Single, j.Boundary()); c != want {
		t.Errorf("after the next purge %+v; want %+v (cam-000's new rows went with the earlier release)", c, want)
	}
}
