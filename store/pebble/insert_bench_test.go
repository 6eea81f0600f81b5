package pebble_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// BenchmarkInsert is a create's primary row: an insert of a new key, by
// concurrent writers, on an untallied table. On an in-memory filesystem
// the sync is nearly free, so what the write path itself costs (the gate
// among it) shows.
func BenchmarkInsert(b *testing.B) { benchmarkInsert(b, false) }

// BenchmarkInsertTallied is BenchmarkInsert on a tallied table: one merge
// more in the batch.
func BenchmarkInsertTallied(b *testing.B) { benchmarkInsert(b, true) }

func benchmarkInsert(b *testing.B, tallied bool) {
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	images, _ := db.Table(b.Context(), "Images")
	if tallied {
		if err := db.Tally(b.Context(), images.Name()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			e := store.Entity{PartitionKey: fmt.Sprintf("cam%03d", i%500), RowKey: store.InvertedTicksRowKey(start.Add(time.Duration(i) * time.Millisecond)),
				Properties: store.Properties{"BlobUri": "https://blobs.example/cam/0000000000.jpg", "SizeBytes": int64(345678)}}
			if _, err := images.Insert(b.Context(), e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
