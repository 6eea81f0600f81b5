package retentiontest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
)

// HookedBackend wraps every table of a backend to watch or break its writes.
type HookedBackend struct {
	store.Backend
	// plain hides the embedded store's purges, as Azure has none: the
	// engine then runs the queue design on it.
	Plain bool
	// before runs ahead of every write; an error fails the write.
	Before func(table string, op string, keys []store.Key) error
	// after runs once a write succeeded; an error is returned instead, as
	// from a process that died before the write's reply: a crash taken in
	// another write's before must not leave this one acknowledged when the
	// crashed store may lack it.
	After func() error
}

// replied is err, or after's error for a write that succeeded.
func (b *HookedBackend) replied(err error) error {
	if err != nil || b.After == nil {
		return err
	}
	return b.After()
}

func (b *HookedBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return &hookedTable{Table: t, b: b}, nil
}

type hookedTable struct {
	store.Table
	b *HookedBackend
}

// transactingBackend is a HookedBackend that keeps the embedded store's
// transactions, each hooked as one write: creates then write both rows at
// once, as the daemon's do, which the sweep a plan prepares requires.
type transactingBackend struct{ *HookedBackend }

func (b transactingBackend) Transact(ctx context.Context, ops []store.TableOp) error {
	keys := make([]store.Key, len(ops))
	inner := make([]store.TableOp, len(ops))
	for i, op := range ops {
		keys[i] = key(op.Op.Entity)
		inner[i] = store.TableOp{Table: unhooked(op.Table), Op: op.Op}
	}
	if b.Before != nil {
		if err := b.Before(ops[0].Table.Name(), "transact", keys); err != nil {
			return err
		}
	}
	return b.replied(b.Backend.(store.Transactor).Transact(ctx, inner))
}

// purgingBackend is a transactingBackend that keeps the embedded store's
// tallies and exclusive batches, each batch hooked as one write
// ("exclusive"), so a crash is taken before it or after it.
type purgingBackend struct{ transactingBackend }

func (b purgingBackend) purger() store.Purger { return b.Backend.(store.Purger) }

func (b purgingBackend) Tally(ctx context.Context, table string) error {
	return b.purger().Tally(ctx, table)
}

func (b purgingBackend) AwaitTally(ctx context.Context, table string) error {
	return b.purger().AwaitTally(ctx, table)
}

func (b purgingBackend) Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error {
	return b.purger().Tallies(ctx, table, partitions, through, visit)
}

func (b purgingBackend) TalliedPartitions(ctx context.Context, table string, through time.Time, visit func(string, int) error) error {
	return b.purger().TalliedPartitions(ctx, table, through, visit)
}

func (b purgingBackend) MinuteKeyed(ctx context.Context, table string) error {
	return b.purger().MinuteKeyed(ctx, table)
}

func (b purgingBackend) WatchLate(table string, before time.Time) (store.LateWrites, func(), error) {
	return b.purger().WatchLate(table, before)
}

func (b purgingBackend) Exclusive(ctx context.Context, through time.Time, stage func(context.Context, store.PurgeBatch) error) error {
	if b.Before != nil {
		if err := b.Before("", "exclusive", nil); err != nil {
			return err
		}
	}
	return b.replied(b.purger().Exclusive(ctx, through, func(ctx context.Context, pb store.PurgeBatch) error {
		return stage(ctx, pb)
	}))
}

// unhooked is the table a HookedBackend wrapped.
func unhooked(t store.Table) store.Table {
	if h, ok := t.(*hookedTable); ok {
		return h.Table
	}
	return t
}

func (h *hookedTable) hook(op string, keys ...store.Key) error {
	if h.b.Before == nil {
		return nil
	}
	return h.b.Before(h.Name(), op, keys)
}

func key(e store.Entity) store.Key { return store.Key{PartitionKey: e.PartitionKey, RowKey: e.RowKey} }

func (h *hookedTable) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	if err := h.hook("insert", key(e)); err != nil {
		return store.Entity{}, err
	}
	stored, err := h.Table.Insert(ctx, e)
	return stored, h.b.replied(err)
}

func (h *hookedTable) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	if err := h.hook("upsert", key(e)); err != nil {
		return store.Entity{}, err
	}
	stored, err := h.Table.Upsert(ctx, e, mode)
	return stored, h.b.replied(err)
}

func (h *hookedTable) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	if err := h.hook("update", key(e)); err != nil {
		return store.Entity{}, err
	}
	stored, err := h.Table.Update(ctx, e, mode, ifMatch)
	return stored, h.b.replied(err)
}

func (h *hookedTable) Delete(ctx context.Context, pk, rk, ifMatch string) error {
	if err := h.hook("delete", store.Key{PartitionKey: pk, RowKey: rk}); err != nil {
		return err
	}
	return h.b.replied(h.Table.Delete(ctx, pk, rk, ifMatch))
}

func (h *hookedTable) Batch(ctx context.Context, ops []store.Op) error {
	keys := make([]store.Key, len(ops))
	kind := "batch"
	for i, op := range ops {
		keys[i] = key(op.Entity)
		switch {
		case op.Kind == store.OpDelete:
			kind = "batch-delete"
		case op.Kind == store.OpInsert && kind == "batch":
			kind = "batch-insert" // a task's record, guarded by its job's lease
		}
	}
	if err := h.hook(kind, keys...); err != nil {
		return err
	}
	return h.b.replied(h.Table.Batch(ctx, ops))
}

// errDead is what every write returns once a simulated crash happened.
var errDead = errors.New("test: process is dead")

// crashAfter kills the store after its n-th write. On the embedded store it
// keeps what was synced at that instant as the filesystem a restarted
// process finds.
type crashAfter struct {
	// took is how long each write takes before it lands: in a synctest
	// bubble, where work takes no time, the writes of a purge then span
	// its lease renewals and its tasks' visibility extensions, as on a
	// real store, and a crash comes at those writes too.
	took    time.Duration
	mu      sync.Mutex
	n       int
	writes  int
	fs      *vfs.MemFS
	dead    bool
	crashed *vfs.MemFS
}

func (c *crashAfter) Before(string, string, []store.Key) error {
	time.Sleep(c.took)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errDead
	}
	c.writes++
	if c.writes > c.n {
		c.dead = true
		if c.fs != nil {
			c.crashed = c.fs.CrashClone(vfs.CrashCloneCfg{})
		}
		return errDead
	}
	return nil
}

// After is HookedBackend's After: a write that ends once the crash happened
// gets no reply.
func (c *crashAfter) After() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errDead
	}
	return nil
}

// kill crashes the store now, whatever its count of writes.
func (c *crashAfter) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.dead = true
		if c.fs != nil {
			c.crashed = c.fs.CrashClone(vfs.CrashCloneCfg{})
		}
	}
}
