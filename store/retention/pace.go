package retention

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/metadatad/metadatad/store"
)

// reserveN takes n rows from l now; the reservation says how long until
// they may go. It is the pacer's one request of a cap, which tests wrap to
// count the rows each cap is asked for (a purge of a few rows never waits,
// so its pacing cannot be told from its duration).
func reserveN(l *rate.Limiter, n int) *rate.Reservation { return l.ReserveN(time.Now(), n) }

// newRowLimiter paces deletes to perSecond rows, in steps of at most a
// tenth of a second of rows, so that a paced purge deletes little and
// often rather than in bursts that stall the requests behind them.
func newRowLimiter(perSecond float64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/10)))
}

// caps are the limiters that pace the job's next step: this process's
// cap (Options.RowsPerSecond), the live cap while requests are being
// served (Options.LiveRowsPerSecond), and the job's own
// (StartRequest.RowsPerSecond).
func (e *Engine) caps(j *Job) []*rate.Limiter {
	var caps []*rate.Limiter
	for _, l := range []*rate.Limiter{e.limiter, e.jobLimiter(j)} {
		if l != nil {
			caps = append(caps, l)
		}
	}
	if e.liveLimiter != nil && e.opts.Live() {
		caps = append(caps, e.liveLimiter)
	}
	return caps
}

// newLiveLimiter paces deletes to perSecond rows while requests are
// served, in steps of half a second of rows. Each step is an embedded
// section, and a section has fixed costs that requests meet: a synced
// commit, and the memtable's range tombstones fragmented anew, which every
// read waits for. At a tenth of a second a step those costs met enough
// requests to lift their p99 to 1.3-2.1x idle; at half a second, 0.8-1.5x
// (docs/benchmarks.md), each section a few milliseconds.
func newLiveLimiter(perSecond float64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond/2)))
}

// pace waits until rows more rows may be deleted under the caps in force
// (see caps), or ctx ends. Primary and index rows count alike. Each step
// asks every cap at once and waits for the latest of them, so the lowest
// cap binds: one wait after the other would pace the job below each. The
// caps are asked again at each step, so a purge that began on an idle
// store slows down as soon as requests come, and speeds up when they stop.
func (e *Engine) pace(ctx context.Context, j *Job, rows int64) error {
	for rows > 0 {
		caps := e.caps(j)
		if len(caps) == 0 {
			return nil
		}
		step := int64(caps[0].Burst())
		for _, l := range caps[1:] {
			step = min(step, int64(l.Burst()))
		}
		n := min(rows, step)
		var wait time.Duration
		reservations := make([]*rate.Reservation, len(caps))
		for i, l := range caps {
			reservations[i] = e.reserve(l, int(n))
			wait = max(wait, reservations[i].Delay())
		}
		if err := Sleep(ctx, wait); err != nil {
			for _, r := range reservations {
				r.Cancel()
			}
			return err
		}
		rows -= n
	}
	return nil
}

// paceUntilCancel is pace that ends with ErrCancelled as soon as the
// job's cancel is requested, from any replica: a paced purge may wait
// long, and a cancel must not. While the pace waits, the job is read at
// each change this process makes and every PollInterval; a pace that
// waits less than that reads nothing.
func (e *Engine) paceUntilCancel(ctx context.Context, j *Job, rows int64) error {
	if rows <= 0 || e.paceStep(j) == math.MaxInt64 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		e.watchCancel(ctx, cancel, j.ID)
	}()
	err := e.pace(ctx, j, rows)
	cancel(nil)
	<-watching
	if errors.Is(context.Cause(ctx), ErrCancelled) {
		return ErrCancelled
	}
	return err
}

// watchCancel cancels ctx with ErrCancelled once the job's cancel is
// requested, or returns when ctx ends.
func (e *Engine) watchCancel(ctx context.Context, cancel context.CancelCauseFunc, id string) {
	for {
		changed := e.Changed()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-time.After(e.opts.PollInterval):
		}
		if j, _, err := e.jobs.get(ctx, id); err == nil && j.CancelRequested {
			cancel(ErrCancelled)
			return
		}
	}
}

// paceStep is the most rows (primary and index alike, halved: a section
// deletes both) that one step of the job's caps admits; MaxInt64 when
// nothing paces it.
func (e *Engine) paceStep(j *Job) int64 {
	step := int64(math.MaxInt64)
	for _, l := range e.caps(j) {
		step = min(step, max(1, int64(l.Burst())/2))
	}
	return step
}

// Sleep waits for d, or until ctx ends: the pause of every pace, the
// engine's and its drivers'.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// forgetEndedLimiters drops this process's limiters of the jobs that have
// ended or are gone. The engine running a job drops its limiter as the job
// ends (finish); a replica whose workers only ran some of the job's tasks
// would otherwise keep it for ever: it learns of the end here, at Run's
// periodic look at the jobs, one read per job it holds a limiter of.
func (e *Engine) forgetEndedLimiters(ctx context.Context) {
	e.mu.Lock()
	ids := slices.Collect(maps.Keys(e.jobLimiters))
	e.mu.Unlock()
	for _, id := range ids {
		j, _, err := e.jobs.get(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound), err == nil && j.State.Terminal():
			e.forgetLimiter(id)
		case err != nil && ctx.Err() == nil:
			e.log.Warn("purge: reading a paced job failed; its limiter stays until the next look", "job", id, "err", err)
		}
	}
}

// forgetLimiter drops the limiter of a job that has ended.
func (e *Engine) forgetLimiter(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobLimiters, id)
}
