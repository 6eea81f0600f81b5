package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/store/retention"
)

// purges are the purge engine and the built-in schedule running in the
// background. Both write to the store, so the daemon waits for both to end
// before it closes the store.
type purges struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startPurges runs engine and, when schedule has an interval, the schedule.
// Purges free space, so their writes pass the free-space guard.
func startPurges(engine *retention.Engine, schedule retention.Schedule, log *slog.Logger) *purges {
	ctx, cancel := context.WithCancel(diskspace.Exempt(context.Background()))
	p := &purges{cancel: cancel, done: make(chan struct{})}
	var running sync.WaitGroup
	running.Go(func() {
		if err := engine.Run(ctx); err != nil {
			log.Error("purge engine", "err", err)
		}
	})
	if schedule.Interval > 0 {
		running.Go(func() { engine.RunSchedule(ctx, schedule) })
	}
	go func() {
		running.Wait()
		close(p.done)
	}()
	return p
}

// stop ends the purges and waits for them until ctx ends; it reports
// whether they ended. A job cut short resumes at the next start.
func (p *purges) stop(ctx context.Context) bool {
	p.cancel()
	select {
	case <-p.done:
		return true
	case <-ctx.Done():
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
}
