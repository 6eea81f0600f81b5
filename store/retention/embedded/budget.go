package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// A storage budget keeps the embedded store's live data under a number of
// bytes: past it, the oldest images across the fleet are purged, as many
// as the store is over by (see budgetCutoff), until the store fits again,
// long before the free-space guard would refuse writes. It measures with the engine's own
// accounting (store.Sizer), never a scan, and finds the oldest images from
// the tallies, oldest day first. Cameras on legal hold are never purged
// for space, nor images younger than the floor: when only those are left
// to purge, the budget reports the store over budget and blocked, and
// purges nothing. It drives the engine through its public API (Start,
// Get, the holds), as any client could: the engine knows nothing of it.

// Budget is a storage budget's configuration.
type Budget struct {
	// MaxBytes is the most live data the store may hold.
	MaxBytes uint64
	// Floor is the youngest age a budget purges: images captured within
	// it are kept whatever the size (the server's -min-retention-days).
	Floor time.Duration
	// Interval is how often RunBudget measures.
	Interval time.Duration
	// Store measures the store and reads its tallies: the embedded store.
	Store BudgetStore
}

// BudgetStore is what a budget needs of the store.
type BudgetStore interface {
	store.Sizer
	store.Purger
}

// BudgetState is what a budget last found.
type BudgetState struct {
	MaxBytes, LiveBytes uint64
	// Measured is when LiveBytes was read; zero before the first settled
	// measure.
	Measured time.Time
	// Over says LiveBytes is past MaxBytes.
	Over bool
	// Blocked, when over, says why nothing more can be purged for space:
	// "held" (the oldest images left are on legal hold) or "floor" (every
	// image left is younger than the floor).
	Blocked string
	// Job is the budget's last purge, Cutoff what it retired before.
	Job    string
	Cutoff time.Time
}

// Budgeter runs a storage budget over an engine and keeps its state
// between steps.
type Budgeter struct {
	engine *retention.Engine
	// tallied are the primary tables of the engine's kinds, whose tallies
	// find the oldest images.
	tallied []store.Table
	log     *slog.Logger

	mu    sync.Mutex
	state BudgetState
	// settle says a purge of the budget ended since the last measure: its
	// deletions are made to count first.
	settle bool
}

// NewBudgeter is a budget over engine, whose image repositories are repos.
func NewBudgeter(engine *retention.Engine, repos []*images.Repository, log *slog.Logger) *Budgeter {
	k := &Budgeter{engine: engine, log: log}
	for _, r := range repos {
		primary, _ := r.Tables()
		k.tallied = append(k.tallied, primary)
	}
	return k
}

// BudgetState returns what the budget last found; the zero state before
// its first step.
func (k *Budgeter) BudgetState() BudgetState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state
}

// Run runs Once every b.Interval until ctx ends.
func (k *Budgeter) Run(ctx context.Context, b Budget) {
	ticker := time.NewTicker(b.Interval)
	defer ticker.Stop()
	for {
		if _, err := k.Once(ctx, b); err != nil && ctx.Err() == nil {
			k.log.Error("storage budget: step failed; retried at the next", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// BudgetOnce is one step of the budget: while its last purge runs, it
// waits; once it has ended, it makes its deletions count; then it
// measures, and if the store is over budget it starts the purge of the
// oldest hour of images that may go. A test steps it instead of waiting
// for Run's ticker.
func (k *Budgeter) Once(ctx context.Context, b Budget) (BudgetState, error) {
	if b.Store == nil {
		return BudgetState{}, errors.New("retention/embedded: a storage budget needs the embedded store")
	}
	e := k.engine
	k.mu.Lock()
	st, settle := k.state, k.settle
	k.mu.Unlock()
	st.MaxBytes = b.MaxBytes
	if st.Job != "" {
		j, err := e.Get(ctx, st.Job)
		if err != nil {
			return st, err
		}
		if !j.State.Terminal() {
			k.set(st, settle)
			return st, nil
		}
		if j.State != retention.Succeeded {
			k.log.Warn("storage budget: its purge did not succeed; the next step tries again", "job", j.ID, "state", string(j.State), "err", j.Error)
		}
		st.Job, settle = "", true
	}
	if settle {
		// The deletions count once Pebble has gathered the statistics of
		// the file they were flushed to, in the background: the next step
		// measures, not this one, which could see them uncounted and purge
		// again.
		if err := b.Store.SettleDeletes(ctx); err != nil {
			return st, err
		}
		k.set(st, false)
		return st, nil
	}
	live, settled := b.Store.LiveBytes()
	if !settled {
		k.set(st, false)
		return st, nil
	}
	st.LiveBytes, st.Measured, st.Over, st.Blocked = live, e.Now().UTC(), live > b.MaxBytes, ""
	if !st.Over {
		k.set(st, false)
		return st, nil
	}
	floor := e.Now().Add(-b.Floor).UTC().Truncate(time.Minute)
	oldest, held, err := k.oldestPurgeable(ctx, b.Store, floor)
	if err != nil {
		return st, err
	}
	if oldest.IsZero() {
		st.Blocked = "floor"
		if held {
			st.Blocked = "held"
		}
		k.set(st, false)
		k.log.Warn("storage budget: the store is over budget and nothing more may be purged for space",
			"live_bytes", live, "max_bytes", b.MaxBytes, "blocked_by", st.Blocked)
		return st, nil
	}
	cutoff := budgetCutoff(oldest, e.Now().UTC(), floor, live, b.MaxBytes)
	j, err := e.Start(ctx, retention.StartRequest{Kinds: e.Kinds(), Cutoff: cutoff})
	var running *retention.RunningError
	if errors.As(err, &running) {
		k.set(st, false)
		return st, nil // another purge frees space first
	}
	if err != nil {
		return st, err
	}
	st.Job, st.Cutoff = j.ID, cutoff
	k.set(st, false)
	k.log.Info("storage budget: the store is over budget; purging the oldest images",
		"live_bytes", live, "max_bytes", b.MaxBytes, "before", cutoff, "job", j.ID)
	return st, nil
}

func (k *Budgeter) set(st BudgetState, settle bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.state, k.settle = st, settle
}

// budgetCutoff is where a budget's purge stops: as far from the oldest
// image that may go, across the span from it to now, as the store's excess
// is a share of its live data, since a fleet capturing every minute
// spreads its images evenly over capture time; at least to the end of the
// oldest image's hour, on a whole hour, never past floor. One step so
// purges what the store is over by, not an hour of it: a store twice its
// budget is back under after one purge. A fleet that grew purges less
// than its excess, and the next step takes more; held cameras' images
// stay, so a share of them is never purged for the rest.
func budgetCutoff(oldest, now, floor time.Time, live, maxBytes uint64) time.Time {
	over := float64(live-maxBytes) / float64(live)
	cutoff := oldest.Add(time.Duration(over * float64(now.Sub(oldest)))).Truncate(time.Hour)
	cutoff = store.MaxTime(cutoff, oldest.Truncate(time.Hour).Add(time.Hour))
	return store.MinTime(cutoff, floor)
}

// errFound stops a tally scan that found what it looked for.
var errFound = errors.New("found")

// oldestPurgeable is the start of the oldest minute, before floor, that
// holds an image of a camera without a legal hold, over every kind; zero
// if there is none, and then whether held cameras have images before floor.
// It reads the tallies oldest day first and stops after the first day
// with such an image, and the holds once.
func (k *Budgeter) oldestPurgeable(ctx context.Context, purger store.Purger, floor time.Time) (time.Time, bool, error) {
	holds, err := k.holds(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	var oldest time.Time
	sawHeld := false
	for _, primary := range k.tallied {
		var day time.Time
		err := purger.Tallies(ctx, primary.Name(), store.Range{}, floor, func(t *store.DayTally) error {
			if !day.IsZero() && !t.Day.Equal(day) {
				return errFound // the first day with such an image is read
			}
			first, any := t.Oldest()
			if !any || !first.Before(floor) {
				return nil
			}
			if holds.Has(t.PartitionKey) {
				sawHeld = true
				return nil
			}
			day = t.Day
			if oldest.IsZero() || first.Before(oldest) {
				oldest = first
			}
			return nil
		})
		if err != nil && !errors.Is(err, errFound) {
			return time.Time{}, false, fmt.Errorf("retention/embedded: budget: %w", err)
		}
	}
	return oldest, sawHeld, nil
}

// holds reads the cameras on legal hold, every page.
func (k *Budgeter) holds(ctx context.Context) (policy.HoldSet, error) {
	set := policy.HoldSet{}
	var resume *store.Cursor
	for {
		page, next, err := k.engine.Policies().ListHolds(ctx, store.MaxPageSize, resume)
		if err != nil {
			return nil, err
		}
		for _, h := range page {
			set.Add(h.CameraID)
		}
		if next == nil {
			return set, nil
		}
		resume = next
	}
}
