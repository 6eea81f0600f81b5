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
// is flushed, past it the memtable is, though it is far from full. Ranges
// small enough to go key by key leave no tombstone and flush nothing.
func TestRangeTombstonesFlushTheMemTable(t *testing.T) {
	ctx := t.Context()
	db, tbl := openRows(t, pebble.Options{Dir: "db", FS: vfs.NewMem()})
	partitions := pebble.MemTableRangeDels + 1
	// Each partition has one row more than goes key by key, so that its
	// range deletion is a tombstone; the small ones have one row.
	seed(t, tbl, "large", partitions, pebble.PointDeleteMax+1)
	seed(t, tbl, "small", partitions, 1)
	deleteRanges := func(prefix string, from, to int, rows int64) {
		t.Helper()
		var ranges []store.RowRange
		for i := from; i < to; i++ {
			ranges = append(ranges, store.RowRange{PartitionKey: fmt.Sprintf("%s-%05d", prefix, i)})
		}
		removed, err := tbl.(store.RangeDeleter).DeleteRanges(ctx, ranges)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range removed {
			if n != rows {
				t.Fatalf("range %d removed %d rows, want %d", from+i, n, rows)
			}
		}
	}
	flushes := db.Metrics().Flush.Count
	deleteRanges("small", 0, partitions, 1)
	deleteRanges("large", 0, 100, pebble.PointDeleteMax+1)
	if got := db.Metrics().Flush.Count; got != flushes {
		t.Fatalf("%d flushes after %d point-deleted ranges and 100 range tombstones, want none", got-flushes, partitions)
	}
	deleteRanges("large", 100, partitions, pebble.PointDeleteMax+1)
	for deadline := time.Now().Add(2 * time.Minute); db.Metrics().Flush.Count == flushes; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no flush after %d range tombstones", partitions)
		}
	}
}

// TestDeleteRangesOfEverySize deletes ranges below, at and above the size
// that goes key by key, side by side in one call, each a part of its
// partition: every count is exact and exactly the rows outside the ranges
// stay.
func TestDeleteRangesOfEverySize(t *testing.T) {
	ctx := t.Context()
	_, tbl := openRows(t, pebble.Options{Dir: "db", FS: vfs.NewMem()})
	sizes := []int{0, 1, pebble.PointDeleteMax - 1, pebble.PointDeleteMax, pebble.PointDeleteMax + 1, 5 * pebble.PointDeleteMax}
	var ranges []store.RowRange
	for i, n := range sizes {
		pk := fmt.Sprintf("p-%05d", i)
		// Rows r-00000 to r-(n+9): the range covers rows 5 to n+4, so
		// five rows stay on each side.
		for j := range n + 10 {
			if _, err := tbl.Insert(ctx, store.Entity{PartitionKey: pk, RowKey: fmt.Sprintf("r-%05d", j)}); err != nil {
				t.Fatal(err)
			}
		}
		ranges = append(ranges, store.RowRange{PartitionKey: pk, Rows: store.Range{From: "r-00005", To: fmt.Sprintf("r-%05d", n+5)}})
	}
	removed, err := tbl.(store.RangeDeleter).DeleteRanges(ctx, ranges)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		if removed[i] != int64(n) {
			t.Errorf("range of %d rows: removed %d", n, removed[i])
		}
		page, err := tbl.Query(ctx, store.Query{PartitionKey: ranges[i].PartitionKey})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, e := range page.Entities {
			left = append(left, e.RowKey)
		}
		want := []string{"r-00000", "r-00001", "r-00002", "r-00003", "r-00004"}
		for j := n + 5; j < n+10; j++ {
			want = append(want, fmt.Sprintf("r-%05d", j))
		}
		if fmt.Sprint(left) != fmt.Sprint(want) {
			t.Errorf("range of %d rows: left %v, want %v", n, left, want)
		}
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

// TestFenceIgnoresOtherTables: writes to other tables since a fence never
// refuse a fenced deletion, however many partitions either touches. A purge
// writes its tasks, jobs and primary rows while it holds a fence of its
// index; with mark slots shared across tables, about one fenced deletion
// in six was refused for that alone.
func TestFenceIgnoresOtherTables(t *testing.T) {
	ctx := t.Context()
	db, index := openRows(t, pebble.Options{Dir: "db", FS: vfs.NewMem()})
	other, err := db.Table(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	const partitions, otherRows = 1000, 20_000
	var keys []string
	for i := range partitions {
		pk := fmt.Sprintf("p%04d", i)
		keys = append(keys, pk)
		if _, err := index.Insert(ctx, store.Entity{PartitionKey: pk, RowKey: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	fence := index.(store.RangeDeleter).Fence()
	for i := 0; i < otherRows; i += store.MaxBatchOps {
		ops := make([]store.TableOp, store.MaxBatchOps)
		for j := range ops {
			ops[j] = store.TableOp{Table: other, Op: store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: fmt.Sprintf("o%06d", i+j), RowKey: "r"}}}
		}
		if err := db.Transact(ctx, ops); err != nil {
			t.Fatal(err)
		}
	}
	if err := index.(store.RangeDeleter).DeletePartitions(ctx, keys, fence); err != nil {
		t.Fatalf("a fenced deletion after %d writes to another table only: %v", otherRows, err)
	}
	page, err := index.Scan(ctx, store.Scan{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != 0 {
		t.Errorf("%d rows left after deleting every partition", len(page.Entities))
	}
}
