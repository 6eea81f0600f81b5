package retention

import (
	"context"

	"golang.org/x/time/rate"
)

// waitN waits until l admits n rows: the pacer's one wait, which tests
// wrap to count the rows each cap is asked for (a purge of a few rows never
// waits, so its pacing cannot be told from its duration).
func waitN(ctx context.Context, l *rate.Limiter, n int) error { return l.WaitN(ctx, n) }

// newRowLimiter paces deletes to perSecond rows, in steps of at most a
// tenth of a second of rows, so that a paced purge deletes little and
// often rather than in bursts that stall the requests behind them.
func newRowLimiter(perSecond float64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/10)))
}

// pace waits until rows more rows may be deleted under this process's cap
// (Options.RowsPerSecond) and the job's own (StartRequest.RowsPerSecond),
// or ctx ends. Primary and index rows count alike.
func (e *Engine) pace(ctx context.Context, j *Job, rows int64) error {
	if err := e.waitRows(ctx, e.limiter, rows); err != nil {
		return err
	}
	return e.waitRows(ctx, e.jobLimiter(j), rows)
}

// jobLimiter is this process's limiter of a job with its own cap, nil
// without one. Each process working on the job paces its own deletes.
func (e *Engine) jobLimiter(j *Job) *rate.Limiter {
	if j.RowsPerSecond <= 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.jobLimiters[j.ID]
	if !ok {
		l = newRowLimiter(j.RowsPerSecond)
		e.jobLimiters[j.ID] = l
	}
	return l
}

// forgetLimiter drops the limiter of a job that has ended.
func (e *Engine) forgetLimiter(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobLimiters, id)
}

// waitRows takes rows tokens from l, a burst at a time; a nil l has no cap.
func (e *Engine) waitRows(ctx context.Context, l *rate.Limiter, rows int64) error {
	if l == nil {
		return nil
	}
	for rows > 0 {
		n := min(rows, int64(l.Burst()))
		if err := e.admit(ctx, l, int(n)); err != nil {
			return err
		}
		rows -= n
	}
	return nil
}
