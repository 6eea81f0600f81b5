package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// settleCancelled brings the counts of a cancelled job's kind to what its
// tasks deleted: it closes the tasks that have not begun, so that no worker
// starts them, and waits for those that have begun to end, or to be closed
// by the delivery that began them before its first delete (stopTask). A
// kind past its work phase has every task in its counts already.
func (e *driver) settleCancelled(ctx context.Context, id string, kind images.Kind) error {
	for {
		j, err := e.env.Job(ctx, id)
		if err != nil {
			return err
		}
		if j.LostTask != "" {
			return fmt.Errorf("%w: %s", retention.ErrTaskLost, j.LostTask) // it never ends
		}
		p := j.Progress(kind)
		if p.Phase != retention.PhasePlan && p.Phase != phaseWork {
			return nil
		}
		// A pass settles the kind only if every task it read had ended:
		// the page it visits was read before, so a task closed, or found
		// changed, in this pass is read again in the next.
		sum := retention.Counts{DevicesTotal: p.Counts.DevicesTotal}
		tasks, again, running := 0, false, false
		err = e.tasks.each(ctx, id, kind, func(t *task) error {
			if tasks++; tasks == 1 && e.hooks.Settle != nil {
				e.hooks.Settle(id, kind)
			}
			switch {
			case t.Done:
				c := t.counts()
				c.DevicesTotal = 0 // the plan counted them
				sum.Add(c)
			case t.Closed:
				// Closed before any delete (stopTask, closeTask): only the
				// cameras given up at their count are in its counts.
				c := t.counts()
				c.DevicesTotal = 0
				sum.Add(c)
			case t.begun():
				again, running = true, true
			default:
				again = true
				return e.closeTask(ctx, taskMessage{JobID: id, Kind: kind, Seq: t.Seq})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !again {
			_, err := e.updateJob(ctx, id, func(j *retention.Job) error {
				q := j.Progress(kind)
				q.Counts, queueState(q).Tallied = sum, tasks
				return nil
			})
			return err
		}
		if running {
			e.wait(ctx)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// closeTask marks a task that has not begun closed, at the version it read,
// so that it and a worker beginning it cannot both win; a task that began
// or changed meanwhile is left as it is.
func (e *driver) closeTask(ctx context.Context, m taskMessage) error {
	t, etag, err := e.tasks.get(ctx, m)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	case t.Done || t.Closed || t.begun():
		return nil
	}
	t.Closed = true
	entity, err := e.tasks.entity(t)
	if err != nil {
		return err
	}
	// Under the job's lease: an engine that lost it closes nothing.
	update := store.Op{Kind: store.OpUpdate, Mode: store.Replace, Entity: entity, IfMatch: etag}
	if err := e.tasks.ownedBatch(ctx, m.JobID, []store.Op{update}); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	e.notify()
	return nil
}
