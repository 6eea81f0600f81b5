package pebble

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metadatad/metadatad/store"
)

// The write gate. An Exclusive stage reads tallies and rows and commits
// deletes computed from them, so no write it could touch may commit in
// between: a count would go wrong, or an old image lose its index row. The
// writes it cannot touch need not wait, and they are most of a store's: a
// camera's new images land in days a purge never reads.
//
// So an Exclusive names its horizon, the start of the UTC day after the
// newest it touches, and while it runs the writes split in two:
//   - a write whose every row lies from the horizon on (a tallied table's
//     rows captured from it on, a minute-keyed table's partitions from its
//     minute on) passes, holding entry shared;
//   - any other write holds the gate shared, and waits for the stage.
//
// With no Exclusive running every write passes. An Exclusive opens a new
// epoch with its horizon, waits out the writes that passed in the epochs
// before (they were checked against another horizon, or none), then holds
// the gate through its stage and commit. The writes that pass its own
// horizon go on meanwhile: none waits for another's commit, as they would
// behind a lock the Exclusive waits for (a synced create's commit, for
// every section). The tallies' registration and backfill sections name no
// horizon: every write waits for them.

// horizon is what a running Exclusive leaves alone.
type horizon struct {
	// from is the first instant it does not touch, zero if it may touch
	// every row; minute is from as a minute partition key.
	from   time.Time
	minute string
}

func newHorizon(through time.Time) *horizon {
	if through.IsZero() {
		return &horizon{}
	}
	from := through.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return &horizon{from: from, minute: store.MinutePartitionKey(from)}
}

// passes reports whether every write lies from the horizon on (see
// above); with no horizon, every write passes.
func (d *DB) passes(h *horizon, writes []write) bool {
	if h == nil {
		return true
	}
	if h.from.IsZero() {
		return false
	}
	var tallies map[string]*tallyState
	if m := d.tallies.Load(); m != nil {
		tallies = *m
	}
	var minuteKeyed map[string]bool
	if m := d.minuteKeyed.Load(); m != nil {
		minuteKeyed = *m
	}
	for _, w := range writes {
		switch {
		case tallies[w.table] != nil:
			at, err := store.TimeFromInvertedTicksRowKey(w.op.Entity.RowKey)
			if err != nil || at.Before(h.from) {
				return false
			}
		case minuteKeyed[w.table]:
			if w.op.Entity.PartitionKey < h.minute {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// entryEpoch counts the writes that passed one horizon (nil: no Exclusive
// running) and are not yet committed.
type entryEpoch struct {
	horizon *horizon
	writers atomic.Int64
	// closed turns writes away to the epoch after it; drained is closed
	// once it is closed and its writers are done.
	closed  atomic.Bool
	drained chan struct{}
	once    sync.Once
}

func newEpoch(h *horizon) *entryEpoch { return &entryEpoch{horizon: h, drained: make(chan struct{})} }

// leave ends one of the epoch's writes.
func (e *entryEpoch) leave() {
	if e.writers.Add(-1) == 0 && e.closed.Load() {
		e.once.Do(func() { close(e.drained) })
	}
}

// drain turns new writes away and waits for those the epoch holds.
func (e *entryEpoch) drain() {
	e.closed.Store(true)
	if e.writers.Load() == 0 {
		e.once.Do(func() { close(e.drained) })
	}
	<-e.drained
}

// enter holds what writes must hold from their first read to their commit,
// and returns its release.
func (d *DB) enter(writes []write) (release func()) {
	for {
		e := d.epoch.Load()
		e.writers.Add(1)
		if e.closed.Load() {
			e.leave() // its successor is in place
			continue
		}
		if d.passes(e.horizon, writes) {
			return e.leave
		}
		e.leave()
		d.gate.RLock()
		return d.gate.RUnlock
	}
}

// exclusively runs fn while no write runs that touches a row before the
// horizon of through (zero: no write at all).
func (d *DB) exclusively(through time.Time, fn func() error) error {
	d.exclusive.Lock()
	defer d.exclusive.Unlock()
	d.undrained = append(d.undrained, d.epoch.Swap(newEpoch(newHorizon(through))))
	defer func() { d.undrained = append(d.undrained, d.epoch.Swap(newEpoch(nil))) }()
	for _, e := range d.undrained {
		e.drain() // the writes that passed another horizon, or none
	}
	d.undrained = d.undrained[:0]
	d.gate.Lock()
	defer d.gate.Unlock()
	return fn()
}

// MinuteKeyed declares that the table's partition keys start with the capture
// minute of their rows (store.Purger), so that its writes of later days
// pass a running Exclusive. Declared while empty, the table is
// instant-first until a row of another form is written (instantfirst.go).
func (d *DB) MinuteKeyed(ctx context.Context, table string) error {
	own, err := d.ownTable(table)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.tallyMu.Lock()
	defer d.tallyMu.Unlock()
	next := map[string]bool{}
	if m := d.minuteKeyed.Load(); m != nil {
		next = maps.Clone(*m)
	}
	next[own.key] = true
	// A write that read the map before it changed waits where it could have
	// passed, which is safe.
	d.minuteKeyed.Store(&next)
	return d.declareInstantFirst(ctx, own)
}
