package pebble_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestRangeTombstonesFlushTheMemTable deletes one range in each of more
// partitions than a memtable may hold tombstones of: below the cap nothing
// is flushed, past it the memtable is, though it is far from full.
func TestRangeTombstonesFlushTheMemTable(t *testing.T) {
	ctx := t.Context()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tbl, err := db.Table(ctx, "Rows")
	if err != nil {
		t.Fatal(err)
	}
	partitions := pebble.MemTableRangeDels + 1
	var ops []store.TableOp
	for i := range partitions {
		e := store.Entity{PartitionKey: fmt.Sprintf("camera-%05d", i), RowKey: "r"}
		if ops = append(ops, store.TableOp{Table: tbl, Op: store.Op{Kind: store.OpInsert, Entity: e}}); len(ops) == 100 || i == partitions-1 {
			if err := db.Transact(ctx, ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	deleteRanges := func(from, to int) {
		t.Helper()
		var ranges []store.RowRange
		for i := from; i < to; i++ {
			ranges = append(ranges, store.RowRange{PartitionKey: fmt.Sprintf("camera-%05d", i)})
		}
		removed, err := tbl.(store.RangeDeleter).DeleteRanges(ctx, ranges)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range removed {
			if n != 1 {
				t.Fatalf("range %d removed %d rows, want 1", from+i, n)
			}
		}
	}
	flushes := db.Metrics().Flush.Count
	deleteRanges(0, 100)
	if got := db.Metrics().Flush.Count; got != flushes {
		t.Fatalf("%d flushes after 100 range tombstones, want none", got-flushes)
	}
	deleteRanges(100, partitions)
	for deadline := time.Now().Add(2 * time.Minute); db.Metrics().Flush.Count == flushes; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no flush after %d range tombstones", partitions)
		}
	}
}
