package retention_test

import (
	"maps"
	"sync"
	"testing"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestPurgePacesEveryDeletedRow: a capped purge asks every cap in force,
// the process's (Options.RowsPerSecond) and the job's own
// (StartRequest.RowsPerSecond), to admit each row it deletes, primary and
// index rows alike, so the lower cap bounds it whichever of the two it is;
// a dry run deletes nothing and asks nothing. The rows asked for are
// counted rather than the purge timed: a purge of a few rows is over
// within one burst, however it is paced. The caps are low enough that
// the purge outgrows their bursts, so the limiters do wait.
func TestPurgePacesEveryDeletedRow(t *testing.T) {
	cases := []struct {
		name         string
		process, job float64
	}{
		{"process cap", 200, 0},
		{"job cap", 0, 200},
		{"job cap below the process's", 400, 200},
		{"job cap above the process's", 200, 400},
	}
	forEachStore(t, func(t *testing.T, open func(*testing.T, retention.Options) *fixture) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				opts := quickOptions()
				opts.RowsPerSecond = c.process
				// No redelivery, which would ask again for a task's rows.
				opts.VisibilityTimeout = patience
				f := open(t, opts)
				var mu sync.Mutex
				asked := map[float64]int64{}
				retention.CountPacedRows(f.engine, func(perSecond float64, rows int) {
					mu.Lock()
					defer mu.Unlock()
					asked[perSecond] += int64(rows)
				})
				f.seed(t, cameras)
				f.run(t)
				req := retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff, RowsPerSecond: c.job, DryRun: true}
				if j := f.purge(t, req); j.State != retention.Succeeded {
					t.Fatalf("dry run ended %s (%s)", j.State, j.Error)
				}
				mu.Lock()
				if len(asked) != 0 {
					t.Errorf("a dry run asked the pacer for %v", asked)
				}
				mu.Unlock()

				req.DryRun = false
				j := f.purge(t, req)
				wantCounts(t, "capped purge", j.Totals(), expiredCounts(1))
				deleted := j.Totals().MetadataRows + j.Totals().IndexRows
				want := map[float64]int64{}
				for _, perSecond := range []float64{c.process, c.job} {
					if perSecond > 0 {
						want[perSecond] = deleted
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if !maps.Equal(asked, want) {
					t.Errorf("rows asked of each cap (rows/s: rows) %v, want %v: every deleted row of each cap in force", asked, want)
				}
			})
		}
	})
}
