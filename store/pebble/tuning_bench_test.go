package pebble

import (
	"fmt"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/metadatad/metadatad/store"
)

// BenchmarkExistenceRead is the read every create makes before its write:
// a key that is not there, just ahead of its camera's newest row (row keys
// are inverted ticks, so the newest row sorts first), on a store of 400,000
// rows of 2,000 cameras in sstables. It compares Pebble's own defaults with
// engineOptions in the same run.
func BenchmarkExistenceRead(b *testing.B) {
	const cameras, perCamera = 2000, 200
	for _, tc := range []struct {
		name string
		tune func(*pebbledb.Options)
	}{
		{"pebble-defaults", func(o *pebbledb.Options) {
			o.CacheSize, o.MemTableSize, o.MemTableStopWritesThreshold = 8<<20, 4<<20, 2
			for i := range o.Levels {
				o.Levels[i].FilterPolicy = nil
			}
		}},
		{"tuned", func(*pebbledb.Options) {}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			opts := Options{Dir: b.TempDir()}.withDefaults()
			watch := newEngineWatch(opts, newFailStop(opts))
			o := engineOptions(opts, watch)
			tc.tune(o)
			db, err := pebbledb.Open(opts.Dir, o)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			d := &DB{db: db, now: opts.Now, locks: newLocks(), watch: watch}
			value, err := encodeValue(store.Entity{Properties: store.Properties{
				"CameraId": "cam", "BlobUri": "https://blobs.example/cam/0000000000.jpg", "SizeBytes": int64(345678)}})
			if err != nil {
				b.Fatal(err)
			}
			for c := range cameras {
				batch := db.NewBatch()
				for r := range perCamera {
					_ = batch.Set(encodeKey("images", fmt.Sprintf("cam-%05d", c), fmt.Sprintf("%019d", 5000+r)), value, nil)
				}
				if err := batch.Commit(pebbledb.NoSync); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
			n := 0
			for b.Loop() {
				c := fmt.Sprintf("cam-%05d", n%cameras)
				n++
				if _, found, err := d.get(encodeKey("images", c, fmt.Sprintf("%019d", 4999-n/cameras)), c, ""); err != nil || found {
					b.Fatal(found, err)
				}
			}
		})
	}
}
