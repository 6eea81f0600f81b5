package retention

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/metadatad/metadatad/store"
)

// DefaultJobRetention is how long the record of an ended job is kept.
const DefaultJobRetention = 30 * 24 * time.Hour

// retireInterval is how often Run retires old job records: they pile up at
// the pace of purges (hourly at most, in practice), so hourly keeps them
// within an hour of their age.
const retireInterval = time.Hour

// RetireJobs deletes the records of the jobs that ended more than
// Options.JobRetention ago, with whatever tasks of theirs are left, and
// returns how many it retired. It reads only jobs created before that
// age (job ids sort by creation, newest first), so its cost follows the
// old jobs, not the history; it goes on past a job it cannot retire and
// returns the errors met. A job still running is kept, however old.
func (e *Engine) RetireJobs(ctx context.Context) (int, error) {
	horizon := e.opts.Now().UTC().Add(-e.opts.JobRetention)
	q := store.Query{PartitionKey: jobPartition, Rows: store.Range{From: jobIDPrefix(horizon)}}
	retired := 0
	var errs []error
	for {
		page, err := e.jobs.table.Query(ctx, q)
		if err != nil {
			return retired, errors.Join(append(errs, err)...)
		}
		for _, row := range page.Entities {
			j, err := jobFromEntity(row)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !j.State.Terminal() || !j.Ended.Before(horizon) {
				continue
			}
			if err := e.retire(ctx, j.ID, row.ETag, horizon); err != nil {
				errs = append(errs, fmt.Errorf("retention: retire job %s: %w", j.ID, err))
				continue
			}
			retired++
		}
		if page.Next == nil {
			break
		}
		q.Resume = page.Next
	}
	if retired > 0 {
		e.log.Info("purge: retired old job records", "jobs", retired, "ended_before", horizon)
	}
	if err := e.driver.Retire(ctx, horizon); err != nil {
		errs = append(errs, err)
	}
	if n, err := e.retireOutbox(ctx, horizon); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		e.log.Info("purge: retired old rows of the deleted images' outbox", "rows", n, "deleted_before", horizon)
	}
	return retired, errors.Join(errs...)
}

// retire deletes one ended job's driver state (the queue design's tasks),
// then the job at the version read. The state goes first: a job record
// without it is a finished job, while state without its job would never be
// found again. A job written since it was read (its version changed: the
// engine's bookkeeping of an ended job) is read again and deleted at its
// new version if it is still ended before horizon: a few times at most.
func (e *Engine) retire(ctx context.Context, id, etag string, horizon time.Time) error {
	if err := e.driver.DropJob(ctx, id); err != nil {
		return err
	}
	if err := e.jobs.deactivate(ctx, id); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := e.jobs.table.Delete(ctx, jobPartition, id, etag)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == retireAttempts {
			return err
		}
		j, fresh, err := e.jobs.get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !j.State.Terminal() || !j.Ended.Before(horizon) {
			return nil // no longer one to retire
		}
		etag = fresh
	}
}

// retireAttempts bounds retire's deletes of a job written meanwhile.
const retireAttempts = 3

// jobIDPrefix is the smallest id of a job created at or before t: ids
// count down with creation time (see newJobID).
func jobIDPrefix(t time.Time) string {
	return fmt.Sprintf("%016x", uint64(math.MaxInt64-t.UnixNano()))
}

// retireOldJobs runs RetireJobs, logging what it could not do.
func (e *Engine) retireOldJobs(ctx context.Context) {
	if _, err := e.RetireJobs(ctx); err != nil && ctx.Err() == nil {
		e.log.Warn("purge: retiring old job records failed; retried in an hour", "err", err)
	}
}
