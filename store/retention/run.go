package retention

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/metadatad/metadatad/store"
)

// ErrTaskLost ends a job one of whose tasks (the queue design's) could
// not be recorded: the next purge retries its cameras.
var ErrTaskLost = errors.New("retention: a task's record could not be written")

// ErrForeignJob stops a job this engine's driver did not record: one of
// an earlier release (whose record had no Driver) or of the other design.
// Its progress means nothing here, so it ends failed and is started again;
// what it deleted stays deleted, and what it left the next purge takes.
var ErrForeignJob = errors.New("retention: the job was recorded by an earlier release or another purge design")

// runJob takes a job through every kind's phases to its end, holding its
// lease throughout.
func (e *Engine) runJob(ctx context.Context, id string) {
	j, resumed := e.takeJob(ctx, id)
	if j == nil {
		return
	}
	// From here every write of the job or its tasks holds only under this
	// lease; the tasks' guard goes in before any of them.
	held := Lease{Job: id, Owner: e.opts.ReplicaID, Epoch: j.LeaseEpoch}
	ctx = withLease(ctx, held)
	if err := e.driver.BeginJob(ctx, id); err != nil {
		e.leaseEnded(ctx, id, err)
		return
	}
	// The renewal writes to the store: it ends and is waited for before the
	// job returns, so nothing of it outlives Run and meets a closed store.
	ctx, cancel := context.WithCancel(ctx)
	ctx, endSpan := e.startSpan(ctx, "purge.job", attribute.String("purge.job_id", id),
		attribute.Bool("purge.dry_run", j.DryRun), attribute.Bool("purge.resumed", resumed))
	var failure error
	defer func() { endSpan(failure) }()
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		e.renewLease(ctx, cancel, id)
	}()
	defer func() {
		cancel()
		<-renewing
	}()

	if j.Driver != e.driver.Name() {
		failure = fmt.Errorf("%w: %q", ErrForeignJob, j.Driver)
		e.finish(ctx, id, failure)
		return
	}
	if !j.DryRun {
		// A job resumed after a crash may have been recorded without its locks.
		if err := e.jobs.lock(ctx, j); err != nil {
			failure = err
			e.finish(ctx, id, err)
			return
		}
	}
	if resumed {
		e.log.Info("purge resumed", "job", id, "replica", e.opts.ReplicaID)
	} else {
		e.log.Info("purge started", "job", id, "kinds", fmt.Sprint(j.ImageKinds()), "cutoff", j.Cutoff, "dry_run", j.DryRun)
	}
	for _, kind := range j.ImageKinds() {
		err := e.driver.PurgeKind(ctx, id, kind)
		if errors.Is(err, ErrCancelled) {
			err = e.cancelled(ctx, j)
		}
		if err != nil {
			failure = err
			if ctx.Err() != nil || errors.Is(err, ErrLeaseLost) {
				e.leaseEnded(ctx, id, err)
				return // shutting down or lease lost: the job resumes elsewhere or later
			}
			e.finish(ctx, id, err)
			return
		}
	}
	e.finish(ctx, id, nil)
}

// takeJob takes the job's lease for this replica, starting a pending job,
// and says whether it was running already (resumed). A nil job is one not
// to run here: ended, gone, leased by a live replica, or not confirmed.
func (e *Engine) takeJob(ctx context.Context, id string) (j *Job, resumed bool) {
	now := e.opts.Now().UTC()
	j, err := e.updateJob(ctx, id, func(j *Job) error {
		if j.State.Terminal() {
			return nil
		}
		if j.Unconfirmed {
			return e.abandonStart(j, now)
		}
		if j.Owner != "" && j.Owner != e.opts.ReplicaID && now.Before(j.LeaseUntil) {
			return errLeased
		}
		resumed = j.State == Running
		j.Owner, j.LeaseUntil = e.opts.ReplicaID, now.Add(e.opts.LeaseDuration)
		j.LeaseEpoch++
		if j.State == Pending {
			j.State, j.Started = Running, now
		}
		return nil
	})
	switch {
	case errors.Is(err, errLeased), errors.Is(err, errStarting):
		return nil, false
	case errors.Is(err, store.ErrNotFound):
		e.dropMarker(ctx, id)
		return nil, false
	case err != nil:
		if ctx.Err() == nil {
			e.log.Error("purge: cannot start", "job", id, "err", err)
		}
		return nil, false
	case j.State.Terminal():
		e.dropMarker(ctx, id)
		return nil, false
	}
	return j, resumed
}
