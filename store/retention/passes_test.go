package retention_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestEachExpiredKeyReadAtMostTwice: on the embedded store a purge reads
// each expired index key once, in the plan's scan, which prepares the
// sweep: its partitions then go by a fenced range deletion that reads
// nothing. It reads each primary key twice: by its camera's count and by
// the range deletion that counts what it removes. A sweep that reads the
// index again makes two reads of an index key, deleting it key by key
// three.
//
// The rows are old by the engine's clock, as expired rows are: an index
// row written within Options.IndexGrace of the purge (an upload of a
// backlog) costs one more read, of its primary row, to prove it gone.
func TestEachExpiredKeyReadAtMostTwice(t *testing.T) {
	opts := quickOptions()
	opts.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
	f := newFixture(t, opts)
	reads := &keyReads{n: map[string]int64{}}
	f.openEngine(t, &readCountingBackend{Backend: f.base, reads: reads})
	f.seed(t, cameras)
	f.run(t)
	j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if j.State != retention.Succeeded {
		t.Fatalf("state %s (%s)", j.State, j.Error)
	}
	wantCounts(t, "job", j.Totals(), expiredCounts(1))
	primary, index := f.repo(images.Single).Tables()
	expired := int64(cameras * expiredPerCamera)
	for table, most := range map[string]int64{primary.Name(): 2, index.Name(): 1} {
		got := reads.get(table)
		if got > most*expired {
			t.Errorf("%s: %d key reads for %d expired rows, %.1f a row; want at most %d", table, got, expired, float64(got)/float64(expired), most)
		}
		if got < expired {
			t.Errorf("%s: %d key reads for %d expired rows: the counting wrapper misses reads", table, got, expired)
		}
	}
}

// keyReads counts, per table, the keys the engine reads.
type keyReads struct {
	mu sync.Mutex
	n  map[string]int64
}

func (r *keyReads) add(table string, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[table] += n
}

func (r *keyReads) get(table string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[table]
}

// readCountingBackend counts the keys read through every fast path of an
// embedded store's tables: one per entity a page, a Get or a key delete
// reads, and one per key a count or a range deletion counts.
type readCountingBackend struct {
	store.Backend
	reads *keyReads
}

func (b *readCountingBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return &readCountingTable{Table: t, reads: b.reads}, nil
}

// Transact keeps the embedded store's transactions: a create writes both
// rows at once, as the daemon's do, which the sweep a plan prepares needs.
func (b *readCountingBackend) Transact(ctx context.Context, ops []store.TableOp) error {
	inner := make([]store.TableOp, len(ops))
	for i, op := range ops {
		inner[i] = op
		if t, ok := op.Table.(*readCountingTable); ok {
			inner[i].Table = t.Table
		}
	}
	return b.Backend.(store.Transactor).Transact(ctx, inner)
}

type readCountingTable struct {
	store.Table
	reads *keyReads
}

func (t *readCountingTable) Get(ctx context.Context, pk, rk string) (store.Entity, error) {
	t.reads.add(t.Name(), 1)
	return t.Table.Get(ctx, pk, rk)
}

func (t *readCountingTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	page, err := t.Table.Query(ctx, q)
	t.reads.add(t.Name(), int64(len(page.Entities)))
	return page, err
}

func (t *readCountingTable) Scan(ctx context.Context, s store.Scan) (store.Page, error) {
	page, err := t.Table.Scan(ctx, s)
	t.reads.add(t.Name(), int64(len(page.Entities)))
	return page, err
}

func (t *readCountingTable) CountRows(ctx context.Context, pk string, rows store.Range) (int64, error) {
	n, err := t.Table.(store.Counter).CountRows(ctx, pk, rows)
	t.reads.add(t.Name(), n)
	return n, err
}

func (t *readCountingTable) DeleteRanges(ctx context.Context, ranges []store.RowRange) ([]int64, error) {
	removed, err := t.Table.(store.RangeDeleter).DeleteRanges(ctx, ranges)
	for _, n := range removed {
		t.reads.add(t.Name(), n)
	}
	return removed, err
}

func (t *readCountingTable) Fence() store.Fence { return t.Table.(store.RangeDeleter).Fence() }

func (t *readCountingTable) DeletePartitions(ctx context.Context, pks []string, fence store.Fence) error {
	return t.Table.(store.RangeDeleter).DeletePartitions(ctx, pks, fence)
}

// DeleteKeys reads each key whose delete is conditional, to check its ETag.
func (t *readCountingTable) DeleteKeys(ctx context.Context, deletes []store.KeyDelete) error {
	t.reads.add(t.Name(), int64(len(deletes)))
	return t.Table.(store.KeyDeleter).DeleteKeys(ctx, deletes)
}
