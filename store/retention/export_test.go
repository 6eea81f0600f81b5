package retention

import (
	"context"

	"golang.org/x/time/rate"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// SetJanitorHook makes e call hook as each janitor pass begins, once the
// kind's tasks are done.
func SetJanitorHook(e *Engine, hook func(job string, kind images.Kind)) { e.janitorHook = hook }

// LeaveAsEarlierRelease rewrites a job as a release before Job.Driver left
// it: running, with no driver named, each kind in phase, so that a test
// sees what becomes of it.
func LeaveAsEarlierRelease(ctx context.Context, e *Engine, id, phase string) error {
	_, err := e.jobs.update(ctx, id, func(j *Job) error {
		j.State, j.Unconfirmed, j.Driver, j.Started = Running, false, "", j.Created
		for _, p := range j.Kinds {
			p.Phase = phase
		}
		return nil
	})
	return err
}

// SetSettleHook makes e call hook in each pass of a cancel's settling,
// once the pass has read its tasks and before it visits them.
func SetSettleHook(e *Engine, hook func(job string, kind images.Kind)) { e.settleHook = hook }

// TaskDone reports whether the task stored under job and rowKey is done.
func TaskDone(ctx context.Context, e *Engine, job, rowKey string) (bool, error) {
	entity, err := e.tasks.table.Get(ctx, job, rowKey)
	if err != nil {
		return false, err
	}
	t, err := decodeTask(entity)
	return err == nil && t.Done, err
}

// DefaultGroupSize is how many cameras a task holds by default.
const DefaultGroupSize = defaultGroupSize

// CountPacedRows makes e's pacer report the rows it asks a cap of
// perSecond to admit; the pacing itself is unchanged.
func CountPacedRows(e *Engine, count func(perSecond float64, rows int)) {
	e.reserve = func(l *rate.Limiter, n int) *rate.Reservation {
		count(float64(l.Limit()), n)
		return reserveN(l, n)
	}
}

// JobLimiters is how many per-job limiters e holds.
func JobLimiters(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobLimiters)
}

// SetMaxPrefixPolicies lowers p's cap on prefix policies, so a test
// reaches it with a few.
func SetMaxPrefixPolicies(p *Policies, n int) { p.maxPrefixes = n }

// SetDeleteHook makes e call hook between each queue design's delete
// batch's pending outbox write and its delete, with the batch's rows.
func SetDeleteHook(e *Engine, hook func(job string, rows []store.Entity)) { e.deleteHook = hook }

// EndOutbox closes and reconciles the job's outbox of deleted images, as
// the job's end does before it seals it.
func EndOutbox(ctx context.Context, e *Engine, id string) error {
	j, _, err := e.jobs.get(ctx, id)
	if err != nil {
		return err
	}
	if err := e.closeJobOutbox(ctx, j); err != nil {
		return err
	}
	return e.reconcileOutbox(ctx, id)
}

// PlanBuckets is how many buckets the queue design's plan split the kind's
// cameras into (0 for one).
func PlanBuckets(p *KindProgress) int { return queueState(p).Buckets }
