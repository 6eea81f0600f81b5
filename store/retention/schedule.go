package retention

import (
	"context"
	"errors"
	"time"
)

// Days is the one meaning of "n days" in retention, for StartPurge's
// retention_days and the built-in schedule alike: n times 24 hours, on no
// calendar, so that "30 days ago" is the same instant whatever the time zone
// and across a daylight-saving change.
func Days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// Schedule starts a purge of every kind every Interval, retiring what is
// older than Retention, for deployments without an outside scheduler.
type Schedule struct {
	// Retention is how old a row must be to go: Days(n) for n days.
	Retention time.Duration
	Interval  time.Duration
}

// RunSchedule starts a purge at once and then every interval until ctx
// ends. A purge still running when the next is due is left alone.
func (e *Engine) RunSchedule(ctx context.Context, s Schedule) {
	ticker := time.NewTicker(s.Interval)
	defer ticker.Stop()
	for {
		j, err := e.Start(ctx, StartRequest{Kinds: e.Kinds(), Cutoff: e.opts.Now().Add(-s.Retention)})
		switch {
		case errors.Is(err, ErrPurgeRunning):
			e.log.Info("scheduled purge skipped: the previous one is still running", "err", err)
		case err != nil && ctx.Err() == nil:
			e.log.Error("scheduled purge could not start", "err", err)
		case err == nil:
			e.log.Info("scheduled purge started", "job", j.ID, "cutoff", j.Cutoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
