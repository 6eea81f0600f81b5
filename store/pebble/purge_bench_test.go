package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// BenchmarkPurgeStage stages what one exclusive section of a purge
// without policies stages (each camera's tallies read, its expired rows
// deleted, its tallies trimmed) over settled rows, then fails the stage so
// that nothing commits and the next iteration stages the same: the CPU a
// section costs per camera, apart from the commit. Its modes: "delete" as
// the store does it (a camera's few rows of a day key by key, more by a
// range deletion), "by-range" every camera by a range deletion, and
// "count" the tallies read alone, the least an exact count of the expired
// rows costs.
func BenchmarkPurgeStage(b *testing.B) {
	for _, l := range []struct{ rows, cameras int }{{200_000, 40}, {200_000, 4_000}, {100_000, 10_000}} {
		for _, mode := range []string{"delete", "by-range", "count"} {
			b.Run(fmt.Sprintf("rows=%d/cameras=%d/%s", l.rows, l.cameras, mode), func(b *testing.B) {
				benchmarkPurgeStage(b, l.rows, l.cameras, mode)
			})
		}
	}
}

func benchmarkPurgeStage(b *testing.B, rows, cameras int, mode string) {
	if mode == "by-range" {
		pebble.SetPointDeleteMax(b, 0)
	}
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tbl, _ := db.Table(b.Context(), "Images")
	if err := db.Tally(b.Context(), tbl.Name()); err != nil {
		b.Fatal(err)
	}
	// The benchmark's layout in store/retention: the expired rows
	// span 1,000 minutes, round robin over the cameras.
	step := 1000 * time.Minute / time.Duration(rows)
	perCamera := rows / cameras
	for c := range cameras {
		var ops []store.Op
		for i := range perCamera {
			at := day0.Add(time.Duration(i*cameras+c) * step)
			ops = append(ops, store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: fmt.Sprintf("cam-%05d", c),
				RowKey: store.InvertedTicksRowKey(at), Properties: store.Properties{"SizeBytes": int64(350_000)}}})
			if len(ops) == 100 || i == perCamera-1 {
				if err := tbl.Batch(b.Context(), ops); err != nil {
					b.Fatal(err)
				}
				ops = ops[:0]
			}
		}
	}
	if err := db.Compact(b.Context()); err != nil {
		b.Fatal(err)
	}
	boundary := day0.Add(30 * 24 * time.Hour)
	abort := errors.New("abort")
	for b.Loop() {
		var deleted int64
		err := db.Exclusive(b.Context(), boundary, func(ctx context.Context, pb store.PurgeBatch) error {
			err := pb.Tallies(ctx, tbl.Name(), store.Range{}, boundary, func(t *store.DayTally) error {
				if mode == "count" {
					deleted += t.RowsBefore(boundary)
					return nil
				}
				n, err := pb.DeleteRowsBefore(tbl.Name(), t.PartitionKey, boundary, []store.DayTally{*t})
				deleted += n
				return err
			})
			if err != nil {
				return err
			}
			return abort
		})
		if !errors.Is(err, abort) {
			b.Fatal(err)
		}
		if deleted != int64(rows) {
			b.Fatalf("staged %d rows, want %d", deleted, rows)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(cameras), "ns/camera")
}

// BenchmarkPurgeInSections purges 10,000 cameras of ten expired rows each
// in committed sections of a few cameras, as a purge paced while requests
// are served does: each section reads the tallies of its own cameras,
// whatever the sections before it deleted. ns/section should not grow
// with the cameras already purged.
func BenchmarkPurgeInSections(b *testing.B) {
	const cameras, perCamera, perSection = 10_000, 10, 16
	boundary := day0.Add(30 * 24 * time.Hour)
	for b.Loop() {
		b.StopTimer()
		db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
		if err != nil {
			b.Fatal(err)
		}
		tbl, _ := db.Table(b.Context(), "Images")
		if err := db.Tally(b.Context(), tbl.Name()); err != nil {
			b.Fatal(err)
		}
		ids := make([]string, cameras)
		var ops []store.Op
		for c := range cameras {
			ids[c] = fmt.Sprintf("cam-%05d", c)
			for i := range perCamera {
				ops = append(ops, store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: ids[c],
					RowKey: store.InvertedTicksRowKey(day0.Add(time.Duration(i) * time.Minute))}})
			}
			if err := tbl.Batch(b.Context(), ops); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
		b.StartTimer()
		var deleted int64
		for from := 0; from < cameras; from += perSection {
			r := store.Range{From: ids[from]}
			if from+perSection < cameras {
				r.To = ids[from+perSection]
			}
			err := db.Exclusive(b.Context(), boundary, func(ctx context.Context, pb store.PurgeBatch) error {
				pb.Unsynced()
				return pb.Tallies(ctx, tbl.Name(), r, boundary, func(t *store.DayTally) error {
					n, err := pb.DeleteRowsBefore(tbl.Name(), t.PartitionKey, boundary, []store.DayTally{*t})
					deleted += n
					return err
				})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if deleted != cameras*perCamera {
			b.Fatalf("deleted %d rows, want %d", deleted, cameras*perCamera)
		}
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(cameras/perSection), "ns/section")
}
