package retention_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestCancelStopsAPacedPurgeAtOnce cancels, from another replica, a purge
// paced to 5 rows a second, as slow as an operator can ask, of 20 cameras:
// without the cancel it would pace for most of a minute. It ends Cancelled
// within a second, having deleted nothing (the pacer's wait is where the
// cancel finds it), is counted among this engine's cancelled jobs, and the
// next purge deletes everything. The time is the bubble's, so the test
// waits for nothing.
func TestCancelStopsAPacedPurgeAtOnce(t *testing.T) {
	kind := images.Single
	for _, s := range []struct {
		name        string
		azureEngine bool
	}{{"pebble", false}, {"pebble-queue", true}} {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := quickOptions()
				opts.PollInterval, opts.VisibilityTimeout = 0, time.Minute // their defaults' scale
				f := newBubbleFixture(t, opts, s.azureEngine)
				f.Seed(t, 20)
				asked := make(chan struct{})
				var once sync.Once
				retention.CountPacedRows(f.Engine, func(float64, int) { once.Do(func() { close(asked) }) })
				before := f.Census(t, kind, base.Add(2*time.Minute))
				f.Run(t)
				started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff, RowsPerSecond: 5})
				if err != nil {
					t.Fatal(err)
				}
				<-asked
				if _, err := f.OtherReplica(t).Cancel(t.Context(), started.ID); err != nil {
					t.Fatal(err)
				}
				cancelled := time.Now()
				j := f.Await(t, started.ID)
				if took := time.Since(cancelled); took > time.Second {
					t.Errorf("the cancelled purge ran on for %s", took)
				}
				if j.State != retention.Cancelled {
					t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
				}
				if got := f.Census(t, kind, j.Boundary()); got != before {
					t.Errorf("rows before the cancel %+v, after it %+v: a cancelled purge deleted", before, got)
				}
				if c := j.Totals(); c.MetadataRows != 0 || c.IndexRows != 0 || c.MetadataRowsLowerBound {
					t.Errorf("cancelled job counts %+v, want no rows", c)
				}
				stats := f.StatsOnceEnded(t, func(ended map[retention.State]int64) bool { return len(ended) > 0 })
				if n := stats.Ended[retention.Cancelled]; n != 1 || len(stats.Ended) != 1 {
					t.Errorf("engine counts %v ended jobs, want 1 cancelled", stats.Ended)
				}

				next := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
				if next.State != retention.Succeeded {
					t.Fatalf("next purge: state %s (%s)", next.State, next.Error)
				}
				if n := next.Totals(); n.MetadataRows != before.PrimaryOld || n.IndexRows != before.IndexOld {
					t.Errorf("next purge counts %+v, %d primary and %d index rows expired", n, before.PrimaryOld, before.IndexOld)
				}
				f.Stop()
			})
		})
	}
}
