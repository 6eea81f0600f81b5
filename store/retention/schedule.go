package retention

import (
	"context"
	"errors"
	"time"

	"github.com/metadatad/metadatad/store"
)

// Schedule starts a purge of every kind every Interval, retiring what is
// older than Retention, or with UsePolicies what each camera's retention
// policy retires, for deployments without an outside scheduler.
type Schedule struct {
	// Retention is how old a row must be to go: policy.Days(n) for n days.
	Retention time.Duration
	Interval  time.Duration
	// UsePolicies purges with the retention policies instead of Retention.
	UsePolicies bool
}

// RunSchedule starts a purge at once and then every interval until ctx
// ends. A purge still running when the next is due is left alone.
func (e *Engine) RunSchedule(ctx context.Context, s Schedule) {
	ticker := time.NewTicker(s.Interval)
	defer ticker.Stop()
	for {
		e.scheduledPurge(ctx, s)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// scheduledPurge starts the schedule's purge unless the schedule is paused.
// A schedule whose state cannot be read starts nothing: it may be paused.
func (e *Engine) scheduledPurge(ctx context.Context, s Schedule) {
	state, err := e.ScheduleState(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.log.Error("scheduled purge skipped: cannot read whether the schedule is paused", "err", err)
		}
		return
	case state.Paused:
		e.log.Info("scheduled purge skipped: the schedule is paused", "since", state.Changed)
		return
	}
	req := StartRequest{Kinds: e.Kinds(), Cutoff: e.opts.Now().Add(-s.Retention), UsePolicies: s.UsePolicies}
	j, err := e.Start(ctx, req)
	switch {
	case errors.Is(err, ErrNoPolicies):
		e.log.Info("scheduled purge skipped: no retention policy is set")
	case errors.Is(err, ErrPurgeRunning):
		e.log.Info("scheduled purge skipped: the previous one is still running", "err", err)
	case err != nil && ctx.Err() == nil:
		e.log.Error("scheduled purge could not start", "err", err)
	case err == nil:
		e.log.Info("scheduled purge started", "job", j.ID, "cutoff", j.Cutoff)
	}
}

// The schedule's state is a row of the jobs table, so that every replica
// sharing the store sees the same.
const (
	schedulePartition = "schedule"
	scheduleRow       = "builtin"
	propPaused        = "Paused"
	propChanged       = "Changed"
)

// ScheduleState is the built-in schedule's run-time switch, the same for
// every replica sharing the store.
type ScheduleState struct {
	// Paused stops the schedule from starting purges; purges already
	// running go on, and StartPurge still works.
	Paused bool
	// Changed is when it was last paused or resumed, zero if never.
	Changed time.Time
}

// SetSchedulePaused pauses or resumes the built-in schedule of every
// replica; a replica's schedule sees it at its next tick.
func (e *Engine) SetSchedulePaused(ctx context.Context, paused bool) (ScheduleState, error) {
	// Whole microseconds, which every backend keeps exactly.
	state := ScheduleState{Paused: paused, Changed: e.opts.Now().UTC().Truncate(time.Microsecond)}
	_, err := e.jobs.table.Upsert(ctx, store.Entity{PartitionKey: schedulePartition, RowKey: scheduleRow,
		Properties: store.Properties{propPaused: paused, propChanged: state.Changed}}, store.Replace)
	if err != nil {
		return ScheduleState{}, err
	}
	return state, nil
}

// ScheduleState reads the built-in schedule's state; never set, it runs.
func (e *Engine) ScheduleState(ctx context.Context) (ScheduleState, error) {
	row, err := e.jobs.table.Get(ctx, schedulePartition, scheduleRow)
	if errors.Is(err, store.ErrNotFound) {
		return ScheduleState{}, nil
	}
	if err != nil {
		return ScheduleState{}, err
	}
	paused, _ := row.Properties[propPaused].(bool)
	changed, _ := row.Properties[propChanged].(time.Time)
	return ScheduleState{Paused: paused, Changed: changed}, nil
}
