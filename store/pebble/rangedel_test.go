package pebble_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestRangeTombstonesFlushTheMemTable deletes one partition by range in
// each of more partitions than a memtable may hold tombstones of: below
// the cap nothing is flushed, past it the memtable is, though it is far
// from full.
func TestRangeTombstonesFlushTheMemTable(t *testing.T) {
	ctx := t.Context()
	db, tbl := openRows(t, pebble.Options{Dir: "db", FS: vfs.NewMem()})
	partitions := pebble.MemTableRangeDels + 1
	seed(t, tbl, "p", partitions, 2)
	deletePartitions := func(from, to int) {
		t.Helper()
		err := db.Exclusive(ctx, time.Time{}, func(_ context.Context, b store.PurgeBatch) error {
			for i := from; i < to; i++ {
				pk := fmt.Sprintf("p-%05d", i)
				// A range of one partition: no key holds a control character.
				if err := b.DeletePartitions(tbl.Name(), store.Range{From: pk, To: pk + " "}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	flushes := db.Metrics().Flush.Count
	deletePartitions(0, 100)
	if got := db.Metrics().Flush.Count; got != flushes {
		t.Fatalf("%d flushes after 100 range tombstones, want none", got-flushes)
	}
	deletePartitions(100, partitions)
	for deadline := time.Now().Add(2 * time.Minute); db.Metrics().Flush.Count == flushes; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no flush after %d range tombstones", partitions)
		}
	}
	if page, err := tbl.Scan(ctx, store.Scan{}); err != nil || len(page.Entities) != 0 {
		t.Fatalf("after deleting every partition: %d rows, %v", len(page.Entities), err)
	}
}

// seed inserts rows rows into each of n partitions named prefix-00000 on.
func seed(t *testing.T, tbl store.Table, prefix string, n, rows int) {
	t.Helper()
	for i := range n {
		pk := fmt.Sprintf("%s-%05d", prefix, i)
		for first := 0; first < rows; first += store.MaxBatchOps {
			var ops []store.Op
			for j := first; j < min(rows, first+store.MaxBatchOps); j++ {
				ops = append(ops, store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: pk, RowKey: fmt.Sprintf("r-%05d", j)}})
			}
			if err := tbl.Batch(t.Context(), ops); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// openRows opens a store, closed when the test ends, and its table Rows.
func openRows(t *testing.T, opts pebble.Options) (*pebble.DB, store.Table) {
	t.Helper()
	db, err := pebble.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tbl, err := db.Table(t.Context(), "Rows")
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

// TestAnExclusiveBatchStartsAtTheLastOnesSize: a purge's sections are
// alike, so each batch starts with room for what the last one committed
// and does not copy itself at each doubling as it grows. (Pebble's pool
// keeps a closed batch's buffer only up to a megabyte.)
func TestAnExclusiveBatchStartsAtTheLastOnesSize(t *testing.T) {
	ctx := t.Context()
	db, tbl := openRows(t, pebble.Options{Dir: "db", FS: vfs.NewMem()})
	seed(t, tbl, "p", 1, 2)
	var capacities []int
	stage := func(_ context.Context, b store.PurgeBatch) error {
		capacities = append(capacities, pebble.BatchCapacity(b))
		for i := range 100_000 {
			if err := b.DeleteUnread(tbl.Name(), store.Key{PartitionKey: "p-00000", RowKey: fmt.Sprintf("r-%06d", i)}); err != nil {
				return err
			}
		}
		return nil
	}
	for range 2 {
		if err := db.Exclusive(ctx, time.Time{}, stage); err != nil {
			t.Fatal(err)
		}
	}
	// 100,000 deletions of keys of ~20 bytes: megabytes.
	if capacities[1] < 100_000*20 || capacities[1] > pebble.MaxStageBytes {
		t.Fatalf("the batches started with room for %v bytes; want the second to hold the first's 100,000 deletions", capacities)
	}
}
