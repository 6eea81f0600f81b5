package retention

import (
	"context"
	"errors"
	"fmt"
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
