package embedded

import (
	"context"
	"errors"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
)

// orphansPage is how many index rows one batch of the orphans pass reads:
// creates of old images wait for one batch at most.
const orphansPage = 1000

// dropOrphans is the embedded purge's orphans pass: it deletes the index
// rows of the kind's orphan partitions (progress.Orphans) whose
// primary rows are gone, then ends the phase. Each page goes in one
// exclusive batch that also records how many rows it deleted and where
// the pass got to, so its counts are exact across crashes and a resumed
// pass starts where the last batch ended. Under the batch's exclusion no
// create of an expired image runs, so a primary row found gone stays gone
// until the batch commits.
func (r *kindRun) dropOrphans(ctx context.Context) error {
	for {
		done := false
		var deleted int64
		err := r.purger.Exclusive(ctx, r.through, func(ctx context.Context, b store.PurgeBatch) error {
			deleted = 0
			j, err := r.env.Job(ctx, r.id)
			if err != nil {
				return err
			}
			p := j.Progress(r.kind)
			if p.Phase != phaseOrphans || state(p).Orphans == nil {
				done = true
				return errNoOrphans
			}
			scan := r.repo.ScanIndexFrom(*state(p).Orphans, state(p).OrphansAt, orphansPage)
			rows, more, err := scan.Next(ctx)
			if err != nil {
				return err
			}
			for _, row := range rows {
				orphaned, err := r.repo.Orphaned(ctx, row)
				if err != nil {
					return err
				}
				if !orphaned {
					continue
				}
				found, err := b.Delete(r.index.Name(), row.Key)
				if err != nil {
					return err
				}
				if found {
					deleted++
				}
			}
			p.Counts.IndexRows += deleted
			state(p).OrphansAt = scan.Cursor()
			if !more || state(p).OrphansAt == nil { // a last page may come with more
				p.Phase = retention.PhaseDone
				if state(p).SectionsLeft {
					p.Phase = retention.PhasePlan
				}
				state(p).Orphans, state(p).OrphansAt, state(p).SectionsLeft, done = nil, nil, false, true
			}
			table, e, err := r.env.JobRecord(ctx, j)
			if err != nil {
				return err
			}
			_, err = b.Put(table, e)
			return err
		})
		if errors.Is(err, errNoOrphans) {
			return nil
		}
		if err != nil {
			return err
		}
		r.env.CountDeleted(r.kind, retention.Counts{IndexRows: deleted})
		r.env.Notify()
		if done {
			return nil
		}
	}
}

// errNoOrphans stops an orphans batch that finds the phase over: it
// commits nothing.
var errNoOrphans = errors.New("retention: no orphans pass to run")
