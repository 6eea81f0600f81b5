package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestScheduleStartsPurges: the built-in schedule purges every kind at once
// and again every interval, retiring what is older than the retention.
func TestScheduleStartsPurges(t *testing.T) {
	f := newFixture(t, quickOptions())
	f.seed(t, 2)
	f.run(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.engine.RunSchedule(ctx, retention.Schedule{Retention: time.Since(cutoff), Interval: 20 * time.Millisecond})
	}()
	defer func() {
		cancel()
		<-done
	}()

	deadline := time.After(patience)
	for {
		jobs, _, err := f.engine.List(t.Context(), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		var succeeded []*retention.Job
		for _, j := range jobs {
			if j.State == retention.Succeeded {
				succeeded = append(succeeded, j)
			}
		}
		if len(succeeded) >= 2 {
			first := succeeded[len(succeeded)-1] // jobs list newest first
			if len(first.Kinds) != len(images.Kinds) {
				t.Fatalf("scheduled purge of %d kinds, want all %d", len(first.Kinds), len(images.Kinds))
			}
			const seeded = 3 * 2 // kinds x cameras
			wantCounts(t, "first scheduled purge", first.Totals(), retention.Counts{DevicesTotal: seeded, DevicesDone: seeded,
				MetadataRows: seeded * expiredPerCamera, IndexRows: seeded * expiredPerCamera})
			for _, kind := range images.Kinds {
				if got := f.census(t, kind, first.Boundary()); got.primaryOld != 0 || got.indexOld != 0 {
					t.Errorf("%s after scheduled purges: %+v", kind, got)
				}
			}
			return
		}
		select {
		case <-f.engine.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v, %d jobs: want two scheduled purges done", patience, len(jobs))
		}
	}
}
