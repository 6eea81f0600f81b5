package retention

import (
	"context"
	"errors"
	"time"
)

// errLeased reports a job another live engine runs.
var errLeased = errors.New("retention: job is leased by another engine")

// errStarting reports a job whose Start may still confirm it.
var errStarting = errors.New("retention: job is being started")

// abandonStart ends a job its Start never confirmed, once that Start is
// surely over: it failed (and its cleanup too), was cancelled or crashed.
// Such a job never runs; its locks are free once it has ended.
func (e *Engine) abandonStart(j *Job, now time.Time) error {
	if now.Before(j.Created.Add(abandonAfter)) {
		return errStarting
	}
	j.State, j.Error, j.Ended = Failed, "the purge did not finish starting; nothing was deleted", now
	return nil
}

// leaseEnded reports a run of a job cut short before its end, by this
// engine's shutdown or by another engine taking the job over; it writes
// nothing.
func (e *Engine) leaseEnded(ctx context.Context, id string, err error) {
	switch {
	case errors.Is(err, ErrLeaseLost):
		e.log.Warn("purge: lease taken by another engine; stopping here, writing nothing more", "job", id, "err", err)
	case ctx.Err() == nil:
		e.log.Error("purge: cannot take the job's tasks; it resumes later", "job", id, "err", err)
	}
}

// dropMarker drops the active marker of a job that has ended or is gone. A
// marker left behind only costs the next resume a read, and that resume
// drops it: a failure is logged, not returned.
func (e *Engine) dropMarker(ctx context.Context, id string) {
	if err := e.jobs.deactivate(ctx, id); err != nil && ctx.Err() == nil {
		e.log.Warn("purge: dropping the marker of an ended job failed; the next resume drops it", "job", id, "err", err)
	}
}

// renewLease extends the job's lease until ctx ends, and cancels the job's
// run if another engine has taken it (after this one stalled past its lease).
func (e *Engine) renewLease(ctx context.Context, lost context.CancelFunc, id string) {
	taken := KeepAlive(ctx, e.opts.LeaseDuration, func(ctx context.Context) (bool, error) {
		_, err := e.jobs.update(ctx, id, func(j *Job) error {
			if j.Owner != e.opts.ReplicaID {
				return errLeased
			}
			j.LeaseUntil = e.opts.Now().UTC().Add(e.opts.LeaseDuration)
			return nil
		})
		return errors.Is(err, errLeased) || errors.Is(err, ErrLeaseLost), err
	}, func(err error) { e.log.Warn("purge: lease renewal failed; retrying", "job", id, "err", err) })
	if taken {
		e.log.Warn("purge: lease taken by another engine; stopping here", "job", id)
		lost()
	}
}

// KeepAlive renews a hold that lapses after period (a job's lease, a task
// message's visibility) every third of it until ctx ends or renew reports
// the hold lost to another engine or worker, and says which: a third
// leaves two more tries before the hold lapses when one fails, and a
// failed renewal is only logged (through retrying) and tried again.
func KeepAlive(ctx context.Context, period time.Duration, renew func(context.Context) (lost bool, err error), retrying func(error)) (lost bool) {
	ticker := time.NewTicker(period / 3)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
		}
		lost, err := renew(ctx)
		if lost {
			return true
		}
		if err != nil && ctx.Err() == nil {
			retrying(err)
		}
	}
}

// cancelled settles every kind of a job whose cancellation stopped it and
// ends it Cancelled.
func (e *Engine) cancelled(ctx context.Context, j *Job) error {
	for _, kind := range j.ImageKinds() {
		if err := e.driver.SettleCancelled(ctx, j.ID, kind); err != nil {
			return err
		}
	}
	return ErrCancelled
}
