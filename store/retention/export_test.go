package retention

import (
	"context"

	"golang.org/x/time/rate"
)

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
