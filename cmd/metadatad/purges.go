package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

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

// startPurges runs engine and, when schedule has an interval, the schedule,
// and when budget has bytes, the storage budget. Purges free space, so
// their writes pass the free-space guard.
func startPurges(engine *retention.Engine, schedule retention.Schedule, budget retention.Budget, log *slog.Logger) *purges {
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
	if budget.MaxBytes > 0 {
		running.Go(func() { engine.RunBudget(ctx, budget) })
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

// budgetInterval is how often the storage budget measures the store: a
// purge of an hour of images ends well within it.
const budgetInterval = time.Minute

// budgetCheck is the health check of the storage budget: an error while
// the store is over budget and nothing more may be purged for space (the
// images left are held or younger than the floor); nil without a budget.
func budgetCheck(svc *services) func() error {
	if svc.budget.MaxBytes == 0 {
		return nil
	}
	return func() error {
		st := svc.engine.BudgetState()
		if st.Over && st.Blocked != "" {
			return fmt.Errorf("the store holds %d live bytes, over its budget of %d, and only images that are %s are left to purge",
				st.LiveBytes, st.MaxBytes, map[string]string{"held": "on legal hold", "floor": "younger than -min-retention-days"}[st.Blocked])
		}
		return nil
	}
}
