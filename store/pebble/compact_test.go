package pebble_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestCompactReturnsTheSpaceOfDeletedRows deletes nine of ten partitions by
// range and compacts: the data shrinks with them, and the tenth partition
// reads as before.
func TestCompactReturnsTheSpaceOfDeletedRows(t *testing.T) {
	ctx := t.Context()
	db, tbl := openRows(t, pebble.Options{Dir: t.TempDir()})
	const partitions, rows = 10, 200
	for p := range partitions {
		var ops []store.TableOp
		for r := range rows {
			// Random, so that compression leaves at least 500 bytes a row.
			payload := hex.EncodeToString(randomBytes(500))
			e := store.Entity{PartitionKey: fmt.Sprintf("p%d", p), RowKey: fmt.Sprintf("%04d", r), Properties: store.Properties{"Payload": payload}}
			if ops = append(ops, store.TableOp{Table: tbl, Op: store.Op{Kind: store.OpInsert, Entity: e}}); len(ops) == 100 {
				if err := db.Transact(ctx, ops); err != nil {
					t.Fatal(err)
				}
				ops = ops[:0]
			}
		}
	}
	if err := db.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	full := db.DataBytes()
	if full < partitions*rows*500 {
		t.Fatalf("%d bytes of data for %d rows of 500 random bytes", full, partitions*rows)
	}
	err := db.Exclusive(ctx, time.Time{}, func(_ context.Context, b store.PurgeBatch) error {
		return b.DeletePartitions(tbl.Name(), store.Range{From: "p1"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if left := db.DataBytes(); left > full/5 {
		t.Fatalf("%d bytes of data after deleting 9 partitions of 10 and compacting, from %d", left, full)
	}
	page, err := tbl.Query(ctx, store.Query{PartitionKey: "p0", Limit: rows + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != rows || len(page.Entities[0].Properties["Payload"].(string)) != 1000 {
		t.Fatalf("partition p0 reads %d rows after the compaction, want %d whole", len(page.Entities), rows)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
