package retention

import (
	"context"
	"errors"
	"fmt"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// ErrJobEnded reports a cancellation of a job that has already ended.
var ErrJobEnded = errors.New("retention: the purge has ended")

// ErrCancelled stops a phase of a job whose cancellation was requested.
var ErrCancelled = errors.New("retention: purge cancelled")

// Cancel asks a job to stop before its next delete and returns it as
// recorded. The request lives on the job in the store, so it works from
// any replica: the engine running the job, wherever it runs, sees it at its
// next look at the job, closes the tasks that have not begun, waits for
// those that have, and ends the job Cancelled with the counts of what it
// deleted. The next purge deletes the rest. store.ErrNotFound for an
// unknown job, ErrJobEnded for one that has ended.
//
// Each phase stops at its own boundary: planning after the task it is
// recording, the work when every task that began has ended; a janitor
// pass begun, which counts nothing, runs to its end. A task's delivery
// (or an embedded purge's section) that the cancel finds waiting for its
// pace (paceUntilCancel) stops there, deleting nothing; one past its pace
// deletes its cameras, unpaced, to the end, as does a delivery of a task an
// earlier one began, which may have deleted some of its rows: the counts
// stay exact.
func (e *Engine) Cancel(ctx context.Context, id string) (*Job, error) {
	j, err := e.updateJob(ctx, id, func(j *Job) error {
		if j.State.Terminal() {
			return fmt.Errorf("%w: purge %s is %s", ErrJobEnded, id, j.State)
		}
		j.CancelRequested = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A job no engine runs right now (pending, or its engine gone) ends as
	// soon as this engine, or the next to resume it, takes it.
	e.launch(id)
	return j, nil
}

// settleCancelled brings the counts of a cancelled job's kind to what its
// tasks deleted: it closes the tasks that have not begun, so that no worker
// starts them, and waits for those that have begun to end, or to be closed
// by the delivery that began them before its first delete (stopTask). A
// kind past its work phase has every task in its counts already.
func (e *Engine) settleCancelled(ctx context.Context, id string, kind images.Kind) error {
	for {
		j, _, err := e.jobs.get(ctx, id)
		if err != nil {
			return err
		}
		if j.LostTask != "" {
			return fmt.Errorf("%w: %s", errTaskLost, j.LostTask) // it never ends
		}
		p := j.Progress(kind)
		if p.Phase != PhasePlan && p.Phase != phaseWork {
			return nil
		}
		// A pass settles the kind only if every task it read had ended:
		// the page it visits was read before, so a task closed, or found
		// changed, in this pass is read again in the next.
		sum := Counts{DevicesTotal: p.Counts.DevicesTotal}
		tasks, again, running := 0, false, false
		err = e.tasks.each(ctx, id, kind, func(t *task) error {
			if tasks++; tasks == 1 && e.settleHook != nil {
				e.settleHook(id, kind)
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
			_, err := e.updateJob(ctx, id, func(j *Job) error {
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
func (e *Engine) closeTask(ctx context.Context, m taskMessage) error {
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
