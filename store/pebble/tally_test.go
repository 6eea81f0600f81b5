package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// day0 is the first capture day of these tests.
var day0 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

func openMem(t *testing.T, fs vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// openTallied opens an in-memory store, closed when the test ends, with
// one tallied table, "Images".
func openTallied(t *testing.T) (*pebble.DB, store.Table) {
	t.Helper()
	db := openMem(t, vfs.NewMem())
	t.Cleanup(func() { db.Close() })
	images, err := db.Table(t.Context(), "Images")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Tally(t.Context(), images.Name()); err != nil {
		t.Fatal(err)
	}
	return db, images
}

type dayKey struct {
	partition string
	day       time.Time
}

// recount tallies a table's rows from the rows themselves.
func recount(t *testing.T, tbl store.Table) map[dayKey][store.MinutesPerDay]int32 {
	t.Helper()
	counts := map[dayKey][store.MinutesPerDay]int32{}
	var resume *store.Cursor
	for {
		page, err := tbl.Scan(t.Context(), store.Scan{Resume: resume, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entities {
			at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
			if err != nil {
				continue
			}
			k := dayKey{e.PartitionKey, at.Truncate(24 * time.Hour)}
			rows := counts[k]
			rows[at.Hour()*60+at.Minute()]++
			counts[k] = rows
		}
		if resume = page.Next; resume == nil {
			return counts
		}
	}
}

// readTallies reads every tally of the table through Exclusive.
func readTallies(t *testing.T, db *pebble.DB, tbl store.Table) map[dayKey][store.MinutesPerDay]int32 {
	t.Helper()
	got := map[dayKey][store.MinutesPerDay]int32{}
	err := db.Exclusive(t.Context(), time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
		return b.Tallies(ctx, tbl.Name(), store.Range{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), func(d *store.DayTally) error {
			got[dayKey{d.PartitionKey, d.Day}] = d.PerMinute()
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkTally fails unless the table's tallies count its rows, no tally
// left holding none.
func checkTally(t *testing.T, db *pebble.DB, tbl store.Table) {
	t.Helper()
	want, got := recount(t, tbl), readTallies(t, db, tbl)
	for k, rows := range got {
		if rows == ([store.MinutesPerDay]int32{}) {
			delete(got, k) // a day whose rows were all deleted one by one
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d tallies, want %d", tbl.Name(), len(got), len(want))
	}
	for k, rows := range want {
		if got[k] != rows {
			for m := range rows {
				if got[k][m] != rows[m] {
					t.Errorf("%s: %s %s minute %d: tally %d, recount %d", tbl.Name(), k.partition, k.day.Format(time.DateOnly), m, got[k][m], rows[m])
				}
			}
		}
	}
}

// randomRow is a row key in one of three days, or now and then one that
// is no instant.
func randomRow(rng *rand.Rand) string {
	if rng.IntN(20) == 0 {
		return fmt.Sprintf("meta%d", rng.IntN(3))
	}
	return store.InvertedTicksRowKey(day0.Add(time.Duration(rng.IntN(3*24*60)) * time.Minute).Add(time.Duration(rng.IntN(4)) * time.Second))
}

// randomWrites writes n random operations, mostly meant to fail now and
// then (a taken key, a missing row), over the tables.
func randomWrites(t *testing.T, db *pebble.DB, tables []store.Table, rng *rand.Rand, n int) {
	ctx := t.Context()
	for range n {
		tbl := tables[rng.IntN(len(tables))]
		pk := fmt.Sprintf("cam%d", rng.IntN(3))
		e := store.Entity{PartitionKey: pk, RowKey: randomRow(rng), Properties: store.Properties{"N": int32(rng.IntN(100))}}
		var err error
		switch rng.IntN(7) {
		case 0, 1:
			_, err = tbl.Insert(ctx, e)
		case 2:
			_, err = tbl.Upsert(ctx, e, store.Replace)
		case 3:
			_, err = tbl.Upsert(ctx, e, store.Merge)
		case 4:
			_, err = tbl.Update(ctx, e, store.Merge, "*")
		case 5:
			err = tbl.Delete(ctx, e.PartitionKey, e.RowKey, "*")
		case 6:
			var ops []store.Op
			seen := map[string]bool{}
			for range 1 + rng.IntN(4) {
				e := store.Entity{PartitionKey: pk, RowKey: randomRow(rng)}
				if seen[e.RowKey] {
					continue
				}
				seen[e.RowKey] = true
				kind := []store.OpKind{store.OpInsert, store.OpUpsert, store.OpDelete}[rng.IntN(3)]
				ops = append(ops, store.Op{Kind: kind, Entity: e, Mode: store.Replace})
			}
			if rng.IntN(2) == 0 {
				err = tbl.Batch(ctx, ops)
			} else {
				tops := make([]store.TableOp, len(ops))
				for i, op := range ops {
					tops[i] = store.TableOp{Table: tbl, Op: op}
				}
				other := tables[rng.IntN(len(tables))]
				if other != tbl {
					tops = append(tops, store.TableOp{Table: other, Op: store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: pk, RowKey: randomRow(rng)}}})
				}
				err = db.Transact(ctx, tops)
			}
		}
		if err != nil && !errors.Is(err, store.ErrAlreadyExists) && !errors.Is(err, store.ErrNotFound) {
			t.Error(err)
			return
		}
	}
}

// TestTallyEqualsRecount: after random writes by several writers on
// tallied and untallied tables, each tally counts the rows exactly.
func TestTallyEqualsRecount(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	ctx := t.Context()
	var tables []store.Table
	for _, name := range []string{"Images", "Videos", "Plain"} {
		tbl, _ := db.Table(ctx, name)
		tables = append(tables, tbl)
	}
	for _, tbl := range tables[:2] {
		if err := db.Tally(ctx, tbl.Name()); err != nil {
			t.Fatal(err)
		}
		if err := db.Tally(ctx, tbl.Name()); err != nil { // again: nothing
			t.Fatal(err)
		}
		if _, done, err := db.TallyProgress(tbl.Name()); err != nil || !done {
			t.Fatalf("Tally of a table with no rows: done %v, %v; want done at once", done, err)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() { randomWrites(t, db, tables, rand.New(rand.NewPCG(uint64(w), 7)), 400) })
	}
	wg.Wait()
	for _, tbl := range tables[:2] {
		checkTally(t, db, tbl)
	}
	err := db.Exclusive(ctx, time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
		return b.Tallies(ctx, tables[2].Name(), store.Range{}, day0, func(*store.DayTally) error { return nil })
	})
	if err == nil {
		t.Error("Tallies of an untallied table: no error")
	}
}

// TestFailedWritesTallyNothing: a refused insert, a failed batch and a
// delete of a missing row leave the tally as it was.
func TestFailedWritesTallyNothing(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	e := store.Entity{PartitionKey: "cam", RowKey: store.InvertedTicksRowKey(day0.Add(time.Hour))}
	if _, err := images.Insert(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := images.Insert(ctx, e); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second insert: %v", err)
	}
	err := images.Batch(ctx, []store.Op{
		{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: "cam", RowKey: store.InvertedTicksRowKey(day0.Add(2 * time.Hour))}},
		{Kind: store.OpInsert, Entity: e},
	})
	if !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("batch: %v", err)
	}
	if err := images.Delete(ctx, "cam", store.InvertedTicksRowKey(day0), "*"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := images.Upsert(ctx, e, store.Replace); err != nil { // replaces: no row added
		t.Fatal(err)
	}
	got := readTallies(t, db, images)
	rows := got[dayKey{"cam", day0}]
	if len(got) != 1 || rows[60] != 1 || rows[120] != 0 {
		t.Fatalf("tallies %v, want one row at minute 60", got)
	}
	checkTally(t, db, images)
}

// fill writes n rows of Tally-less history into the table, 3 cameras over
// 3 days, by batches.
func fill(t *testing.T, tbl store.Table, n int) {
	t.Helper()
	for i := 0; i < n; {
		var ops []store.Op
		pk := fmt.Sprintf("cam%d", i%3)
		for ; len(ops) < 100 && i < n; i++ {
			at := day0.Add(time.Duration(i) * 3 * 24 * time.Hour / time.Duration(n))
			ops = append(ops, store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: pk, RowKey: store.InvertedTicksRowKey(at)}})
		}
		if err := tbl.Batch(t.Context(), ops); err != nil {
			t.Fatal(err)
		}
	}
}

// fillEvenly writes n rows, a ninth each to cam0, cam1 and cam2 on each of
// three days from day0, spread over the day.
func fillEvenly(t *testing.T, tbl store.Table, n int) {
	t.Helper()
	for i := range n {
		day, slot, perDay := i/3%3, i/9, n/9
		at := day0.Add(time.Duration(day)*24*time.Hour + time.Duration(slot)*24*time.Hour/time.Duration(perDay))
		if _, err := tbl.Insert(t.Context(), store.Entity{PartitionKey: fmt.Sprintf("cam%d", i%3), RowKey: store.InvertedTicksRowKey(at)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackfillIsExact: a table written before Tally is tallied by the
// backfill in sections, while writers go on writing it.
func TestBackfillIsExact(t *testing.T) {
	pebble.SetBackfillSectionRows(t, 50)
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	ctx := t.Context()
	images, _ := db.Table(ctx, "Images")
	fill(t, images, 3000)
	var wg sync.WaitGroup
	for range 4 { // concurrent calls start one backfill
		wg.Go(func() {
			if err := db.Tally(ctx, images.Name()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for w := range 3 {
		wg.Go(func() { randomWrites(t, db, []store.Table{images}, rand.New(rand.NewPCG(uint64(w), 9)), 300) })
	}
	if err := db.AwaitTally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	rows, done, err := db.TallyProgress(images.Name())
	if err != nil || !done || rows < 3000-900 {
		t.Fatalf("progress: %d rows, done %v, %v", rows, done, err)
	}
	checkTally(t, db, images)
}

// TestBackfillResumes: a backfill stopped after a few sections, as a
// restart stops it, goes on from its cursor when Tally is called again.
func TestBackfillResumes(t *testing.T) {
	pebble.SetBackfillSectionRows(t, 100)
	fs := vfs.NewMem()
	db := openMem(t, fs)
	ctx := t.Context()
	images, _ := db.Table(ctx, "Images")
	fill(t, images, 1000)
	sections := 0
	stopped := make(chan struct{})
	pebble.SetBackfillAfterSection(t, func() bool {
		if sections++; sections == 3 {
			close(stopped)
			return false
		}
		return true
	})
	if err := db.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	<-stopped
	if rows, done, _ := db.TallyProgress(images.Name()); rows != 300 || done {
		t.Fatalf("stopped backfill: %d rows, done %v; want 300, not done", rows, done)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	pebble.SetBackfillAfterSection(t, func() bool { return true })

	db = openMem(t, fs)
	defer db.Close()
	images, _ = db.Table(ctx, "Images")
	if err := db.AwaitTally(ctx, images.Name()); err == nil {
		t.Fatal("AwaitTally before Tally: no error")
	}
	if err := db.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	if err := db.AwaitTally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	if rows, done, _ := db.TallyProgress(images.Name()); rows != 700 || !done {
		t.Fatalf("resumed backfill: %d rows, done %v; want the other 700", rows, done)
	}
	checkTally(t, db, images)
}

// dayTallies reads the partition's tallies through boundary's day.
func dayTallies(ctx context.Context, b store.PurgeBatch, tbl store.Table, partition string, through time.Time) ([]store.DayTally, error) {
	var out []store.DayTally
	err := b.Tallies(ctx, tbl.Name(), store.Range{From: partition}, through, func(d *store.DayTally) error {
		if d.PartitionKey == partition {
			c := *d // d is the scan's, valid during the call only
			c.Minutes = slices.Clone(d.Minutes)
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// purgeBefore deletes a partition's rows before boundary in one Exclusive.
func purgeBefore(db *pebble.DB, tbl store.Table, partition string, boundary time.Time) (int64, error) {
	var n int64
	err := db.Exclusive(context.Background(), boundary, func(ctx context.Context, b store.PurgeBatch) error {
		tallies, err := dayTallies(ctx, b, tbl, partition, boundary)
		if err != nil {
			return err
		}
		n, err = b.DeleteRowsBefore(tbl.Name(), partition, boundary, tallies)
		return err
	})
	return n, err
}

// TestDeleteRowsBeforeInsideADay: a boundary inside a day deletes exactly
// the partition's rows before it, and the tallies still count what is left:
// by one range deletion where a day holds many rows, one by one where it
// holds a few (pebble.PointDeleteMax), which leaves no range deletion for
// later reads to fragment.
func TestDeleteRowsBeforeInsideADay(t *testing.T) {
	for _, c := range []struct {
		name       string
		rows       int // over three cameras and three days
		fill       func(*testing.T, store.Table, int)
		tombstones int64
	}{
		{"many rows a day, by range", 900, fill, 1},
		{"a few rows a day, one by one", int(9 * pebble.PointDeleteMax), fillEvenly, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, images := openTallied(t)
			ctx := t.Context()
			c.fill(t, images, c.rows)
			// A row key that is no instant sorts after every one, and stays.
			if _, err := images.Insert(ctx, store.Entity{PartitionKey: "cam1", RowKey: "meta"}); err != nil {
				t.Fatal(err)
			}
			boundary := day0.Add(24*time.Hour + 10*time.Hour + 30*time.Minute)
			want := int64(0)
			before := recount(t, images)
			for k, rows := range before {
				if k.partition != "cam1" {
					continue
				}
				for m, n := range rows {
					if k.day.Add(time.Duration(m) * time.Minute).Before(boundary) {
						want += int64(n)
					}
				}
			}
			tombstones := pebble.RangeDels(db)
			n, err := purgeBefore(db, images, "cam1", boundary)
			if err != nil || n != want || want == 0 {
				t.Fatalf("DeleteRowsBefore: %d rows, %v; want %d", n, err, want)
			}
			if got := pebble.RangeDels(db) - tombstones; got != c.tombstones {
				t.Errorf("%d range deletions, want %d", got, c.tombstones)
			}
			page, err := images.Scan(ctx, store.Scan{Limit: store.MaxPageSize})
			if err != nil {
				t.Fatal(err)
			}
			left := 0
			for _, e := range page.Entities {
				at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
				if e.PartitionKey == "cam1" && err == nil && at.Before(boundary) {
					t.Errorf("row %s at %s left before the boundary", e.RowKey, at)
				}
				left++
			}
			if left != c.rows+1-int(want) {
				t.Errorf("%d rows left, want %d", left, c.rows+1-int(want))
			}
			if _, err := images.Get(ctx, "cam1", "meta"); err != nil {
				t.Errorf("the row keyed by no instant: %v", err)
			}
			checkTally(t, db, images)
			// Nothing more to delete: the tallies of the deleted days are gone.
			if n, err := purgeBefore(db, images, "cam1", boundary); err != nil || n != 0 {
				t.Fatalf("second purge: %d, %v", n, err)
			}
		})
	}
}

// TestDeleteRowsBeforeRefusesOtherTallies: tallies of another partition
// or of a later day, and a boundary inside a minute, are refused.
func TestDeleteRowsBeforeRefusesOtherTallies(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	boundary := day0.Add(36 * time.Hour)
	for name, c := range map[string]struct {
		boundary time.Time
		tally    store.DayTally
	}{
		"other partition": {boundary, store.DayTally{PartitionKey: "cam2", Day: day0}},
		"later day":       {boundary, store.DayTally{PartitionKey: "cam1", Day: day0.Add(48 * time.Hour)}},
		"inside a minute": {boundary.Add(time.Second), store.DayTally{PartitionKey: "cam1", Day: day0}},
	} {
		err := db.Exclusive(ctx, time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
			_, err := b.DeleteRowsBefore(images.Name(), "cam1", c.boundary, []store.DayTally{c.tally})
			return err
		})
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestTalliesSkipScan: Tallies visits the partitions in range, through
// the day given, in (day, partition) order.
func TestTalliesSkipScan(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	for day := range 4 {
		for _, pk := range []string{"a", "b", "c", "d", "e"} {
			at := day0.Add(time.Duration(day)*24*time.Hour + time.Hour)
			if _, err := images.Insert(ctx, store.Entity{PartitionKey: pk, RowKey: store.InvertedTicksRowKey(at)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got []string
	err := db.Exclusive(ctx, time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
		return b.Tallies(ctx, images.Name(), store.Range{From: "b", To: "d"}, day0.Add(2*24*time.Hour+23*time.Hour), func(d *store.DayTally) error {
			got = append(got, d.Day.Format("0102")+d.PartitionKey)
			return nil
		})
	})
	want := []string{"0501b", "0501c", "0502b", "0502c", "0503b", "0503c"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("visited %v, %v; want %v", got, err, want)
	}
	got = nil
	err = db.Exclusive(ctx, time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
		return b.Tallies(ctx, images.Name(), store.Range{From: "d"}, day0, func(d *store.DayTally) error {
			got = append(got, d.Day.Format("0102")+d.PartitionKey)
			return nil
		})
	})
	if want := []string{"0501d", "0501e"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("visited %v, %v; want %v", got, err, want)
	}
}

// TestTalliesAfterEarlierSections: after a section deleted the first
// cameras' rows and tallies, a later section's Tallies still visits
// exactly its range of every day, whatever days the fleet has gaps in,
// and days whose only tallies went or lie outside the range.
func TestTalliesAfterEarlierSections(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	seedScatteredDays(t, images)
	through := day0.Add(9 * 24 * time.Hour)
	visit := func(r store.Range, each func(b store.PurgeBatch, d *store.DayTally) error) []string {
		t.Helper()
		var got []string
		err := db.Exclusive(ctx, through, func(ctx context.Context, b store.PurgeBatch) error {
			return b.Tallies(ctx, images.Name(), r, through, func(d *store.DayTally) error {
				got = append(got, d.Day.Format("0102")+d.PartitionKey)
				return each(b, d)
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	purge := func(b store.PurgeBatch, d *store.DayTally) error {
		_, err := b.DeleteRowsBefore(images.Name(), d.PartitionKey, through, []store.DayTally{*d})
		return err
	}
	keep := func(store.PurgeBatch, *store.DayTally) error { return nil }
	if got, want := visit(store.Range{To: "c"}, purge), []string{"0501a", "0501b", "0502a", "0502b", "0504a", "0504b"}; !slices.Equal(got, want) {
		t.Fatalf("first section visited %v, want %v", got, want)
	}
	if got, want := visit(store.Range{From: "c", To: "e"}, keep), []string{"0501c", "0501d", "0502c", "0509c"}; !slices.Equal(got, want) {
		t.Errorf("second section visited %v, want %v", got, want)
	}
	if got, want := visit(store.Range{From: "c"}, keep), []string{"0501c", "0501d", "0501e", "0502c", "0507e", "0509c", "0509e"}; !slices.Equal(got, want) {
		t.Errorf("the rest visited %v, want %v", got, want)
	}
	if got, want := visit(store.Range{}, keep), []string{"0501c", "0501d", "0501e", "0502c", "0507e", "0509c", "0509e"}; !slices.Equal(got, want) {
		t.Errorf("all visited %v, want %v", got, want)
	}
}

// seedScatteredDays gives cameras a to e a row each on some of nine days
// from day0: a, b, c, d and e on the first; a, b and c on the second; a
// and b on the fourth; e on the seventh; c and e on the ninth.
// TestTalliedPartitions: the partitions with tallies up to a day, in
// order, each with its days there, are what Tallies visits, read from the
// keys alone: on days with gaps, up to each day, and after a section
// deleted the first cameras' rows of some days.
func TestTalliedPartitions(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	seedScatteredDays(t, images)
	type counted struct {
		partition string
		days      int
	}
	// fromTallies is the oracle: Tallies' partitions and their days.
	fromTallies := func(through time.Time) []counted {
		var out []counted
		if err := db.Tallies(ctx, images.Name(), store.Range{}, through, func(d *store.DayTally) error {
			i, found := slices.BinarySearchFunc(out, d.PartitionKey, func(c counted, pk string) int { return strings.Compare(c.partition, pk) })
			if !found {
				out = slices.Insert(out, i, counted{d.PartitionKey, 0})
			}
			out[i].days++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(when string, through time.Time, want []counted) {
		t.Helper()
		var got []counted
		if err := db.TalliedPartitions(ctx, images.Name(), through, func(pk string, days int) error {
			got = append(got, counted{pk, days})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || !slices.Equal(got, fromTallies(through)) {
			t.Errorf("%s, through %s: %v, want %v (Tallies: %v)", when, through.Format(time.DateOnly), got, want, fromTallies(through))
		}
	}
	check("seeded", day0.Add(9*24*time.Hour), []counted{{"a", 3}, {"b", 3}, {"c", 3}, {"d", 1}, {"e", 3}})
	check("seeded", day0.Add(24*time.Hour), []counted{{"a", 2}, {"b", 2}, {"c", 2}, {"d", 1}, {"e", 1}})
	check("seeded", day0.Add(-time.Hour), nil)

	through := day0.Add(2 * 24 * time.Hour)
	if err := db.Exclusive(ctx, through, func(ctx context.Context, b store.PurgeBatch) error {
		return b.Tallies(ctx, images.Name(), store.Range{To: "c"}, through, func(d *store.DayTally) error {
			_, err := b.DeleteRowsBefore(images.Name(), d.PartitionKey, through, []store.DayTally{*d})
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}
	check("after a section", day0.Add(9*24*time.Hour), []counted{{"a", 1}, {"b", 1}, {"c", 3}, {"d", 1}, {"e", 3}})

	// A visit's error ends the walk and is returned.
	stop := errors.New("stop")
	var visited int
	if err := db.TalliedPartitions(ctx, images.Name(), through, func(string, int) error { visited++; return stop }); !errors.Is(err, stop) || visited != 1 {
		t.Errorf("a visit that fails: %v after %d visits, want %v after one", err, visited, stop)
	}
	untallied, _ := db.Table(ctx, "Jobs")
	if err := db.TalliedPartitions(ctx, untallied.Name(), through, func(string, int) error { return nil }); err == nil {
		t.Error("TalliedPartitions of a table without a tally: no error")
	}
}

func seedScatteredDays(t *testing.T, images store.Table) {
	t.Helper()
	cameras := map[int][]string{0: {"a", "b", "c", "d", "e"}, 1: {"a", "b", "c"}, 3: {"a", "b"}, 6: {"e"}, 8: {"c", "e"}}
	for day, pks := range cameras {
		for _, pk := range pks {
			at := day0.Add(time.Duration(day)*24*time.Hour + time.Hour)
			if _, err := images.Insert(t.Context(), store.Entity{PartitionKey: pk, RowKey: store.InvertedTicksRowKey(at)}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFailingStageCommitsNothing: a stage's error undoes all it staged.
func TestFailingStageCommitsNothing(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	ctx := t.Context()
	images, _ := db.Table(ctx, "Images")
	jobs, _ := db.Table(ctx, "Jobs")
	if err := db.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	fill(t, images, 100)
	if _, err := jobs.Insert(ctx, store.Entity{PartitionKey: "j", RowKey: "old"}); err != nil {
		t.Fatal(err)
	}
	failure := errors.New("stage failed")
	err := db.Exclusive(ctx, time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
		tallies, err := dayTallies(ctx, b, images, "cam0", day0.Add(72*time.Hour))
		if err != nil {
			return err
		}
		if _, err := b.DeleteRowsBefore(images.Name(), "cam0", day0.Add(72*time.Hour), tallies); err != nil {
			return err
		}
		if _, err := b.Put(jobs.Name(), store.Entity{PartitionKey: "j", RowKey: "new"}); err != nil {
			return err
		}
		if _, err := b.Delete(jobs.Name(), store.Key{PartitionKey: "j", RowKey: "old"}); err != nil {
			return err
		}
		return failure
	})
	if !errors.Is(err, failure) {
		t.Fatalf("Exclusive: %v, want the stage's error", err)
	}
	if n, _ := images.(store.Counter).CountRows(ctx, "cam0", store.Range{}); n == 0 {
		t.Error("the failed stage's range deletion was committed")
	}
	if _, err := jobs.Get(ctx, "j", "new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the failed stage's put: %v", err)
	}
	if _, err := jobs.Get(ctx, "j", "old"); err != nil {
		t.Errorf("the failed stage's delete: %v", err)
	}
	checkTally(t, db, images)
}

// TestWritesWaitForExclusive: a write started during a stage waits for its
// commit; writers racing with purges leave the tallies exact.
func TestWritesWaitForExclusive(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	late := store.Entity{PartitionKey: "cam0", RowKey: store.InvertedTicksRowKey(day0.Add(time.Minute))}
	wrote := make(chan error, 1)
	err := db.Exclusive(ctx, time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
		go func() { _, err := images.Insert(ctx, late); wrote <- err }()
		select {
		case err := <-wrote:
			return fmt.Errorf("a write committed during the stage: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		// The stage sees the store without the waiting write.
		tallies, err := dayTallies(ctx, b, images, "cam0", day0.Add(time.Hour))
		if err != nil || len(tallies) != 0 {
			return fmt.Errorf("tallies during the stage: %v, %v", tallies, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() { randomWrites(t, db, []store.Table{images}, rand.New(rand.NewPCG(uint64(w), 11)), 300) })
	}
	for i := range 20 {
		boundary := day0.Add(time.Duration(i) * 3 * time.Hour)
		if _, err := purgeBefore(db, images, fmt.Sprintf("cam%d", i%3), boundary); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	checkTally(t, db, images)
}

// TestLaterDaysPassExclusive: during a stage bounded by through, a write
// whose rows all lie after through's day (a tallied table's rows captured
// then, a minute-keyed table's partitions of then) commits; any other
// write waits for the stage: an old image, one of through's own day, a
// batch mixing the two, a row of a table neither tallied nor minute-keyed.
// The stage is refused what would reach past its day.
func TestLaterDaysPassExclusive(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	ctx := t.Context()
	images, _ := db.Table(ctx, "Images")
	index, _ := db.Table(ctx, "ImagesIndex")
	jobs, _ := db.Table(ctx, "Jobs")
	if err := db.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	if err := db.MinuteKeyed(ctx, index.Name()); err != nil {
		t.Fatal(err)
	}
	through := day0.Add(12 * time.Hour)
	create := func(at time.Time, indexAt time.Time) func() error {
		return func() error {
			return db.Transact(ctx, []store.TableOp{
				{Table: images, Op: store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: "cam0", RowKey: store.InvertedTicksRowKey(at)}}},
				{Table: index, Op: store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: store.MinutePartitionKey(indexAt), RowKey: "cam0_" + store.InvertedTicksRowKey(at)}}},
			})
		}
	}
	tomorrow := day0.Add(24 * time.Hour)
	passing := map[string]func() error{
		"a create of the next day": create(tomorrow, tomorrow),
		"an index row of the next day": func() error {
			_, err := index.Insert(ctx, store.Entity{PartitionKey: store.MinutePartitionKey(tomorrow.Add(time.Hour)), RowKey: "x"})
			return err
		},
	}
	waiting := map[string]func() error{
		"an old create":                  create(day0.Add(time.Minute), day0.Add(time.Minute)),
		"a create of through's own day":  create(day0.Add(20*time.Hour), day0.Add(20*time.Hour)),
		"a young row with an old index":  create(tomorrow.Add(time.Minute), day0.Add(time.Hour)),
		"a row no horizon says anything": func() error { _, err := jobs.Insert(ctx, store.Entity{PartitionKey: "j", RowKey: "1"}); return err },
	}
	done := map[string]chan error{}
	var wg sync.WaitGroup
	defer wg.Wait() // before the store closes, whatever failed
	start := func(ws map[string]func() error) {
		for name, w := range ws {
			c := make(chan error, 1)
			done[name] = c
			wg.Go(func() { c <- w() })
		}
	}
	err := db.Exclusive(ctx, through, func(ctx context.Context, b store.PurgeBatch) error {
		start(waiting)
		start(passing)
		for name := range passing {
			select {
			case err := <-done[name]:
				if err != nil {
					return fmt.Errorf("%s: %v", name, err)
				}
			case <-time.After(10 * time.Second):
				return fmt.Errorf("%s waited for the stage", name)
			}
		}
		time.Sleep(20 * time.Millisecond) // the waiting writes had their chance to slip through
		for name := range waiting {
			select {
			case err := <-done[name]:
				return fmt.Errorf("%s committed during the stage: %v", name, err)
			default:
			}
		}
		if _, err := dayTallies(ctx, b, images, "cam0", tomorrow); err == nil {
			return errors.New("the stage read the tallies of a day past its own")
		}
		if _, err := b.DeleteRowsBefore(images.Name(), "cam0", tomorrow, nil); err == nil {
			return errors.New("the stage deleted rows up to a day past its own")
		}
		if err := b.DeletePartitions(index.Name(), store.Range{}); err == nil {
			return errors.New("the stage deleted every index partition")
		}
		if _, err := b.Delete(index.Name(), store.Key{PartitionKey: store.MinutePartitionKey(tomorrow), RowKey: "x"}); err == nil {
			return errors.New("the stage deleted an index row of a day past its own")
		}
		return b.DeletePartitions(index.Name(), store.Range{To: store.MinutePartitionKey(through)})
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range waiting {
		if err := <-done[name]; err != nil {
			t.Errorf("%s, after the stage: %v", name, err)
		}
	}
	checkTally(t, db, images)
}

// TestExclusiveSurvivesCrash: what Exclusive committed is there after a
// power loss; what a stage staged before the loss is not.
func TestExclusiveSurvivesCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := openMem(t, fs)
	ctx := t.Context()
	images, _ := db.Table(ctx, "Images")
	jobs, _ := db.Table(ctx, "Jobs")
	if err := db.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	fill(t, images, 300)
	boundary := day0.Add(30 * time.Hour)
	if _, err := purgeBefore(db, images, "cam0", boundary); err != nil {
		t.Fatal(err)
	}
	after := fs.CrashClone(vfs.CrashCloneCfg{})
	var during *vfs.MemFS
	err := db.Exclusive(ctx, time.Time{}, func(ctx context.Context, b store.PurgeBatch) error {
		tallies, err := dayTallies(ctx, b, images, "cam1", boundary)
		if err != nil {
			return err
		}
		if _, err := b.DeleteRowsBefore(images.Name(), "cam1", boundary, tallies); err != nil {
			return err
		}
		if _, err := b.Put(jobs.Name(), store.Entity{PartitionKey: "j", RowKey: "r"}); err != nil {
			return err
		}
		during = fs.CrashClone(vfs.CrashCloneCfg{})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	for name, crashed := range map[string]*vfs.MemFS{"after the first": after, "during the second": during} {
		db := openMem(t, crashed)
		images, _ := db.Table(ctx, "Images")
		jobs, _ := db.Table(ctx, "Jobs")
		if err := db.Tally(ctx, images.Name()); err != nil {
			t.Fatal(err)
		}
		if n, _ := images.(store.Counter).CountRows(ctx, "cam0", store.InvertedTicksRows(nil, &boundary)); n != 0 {
			t.Errorf("%s: %d rows of the committed purge are back", name, n)
		}
		if n, _ := images.(store.Counter).CountRows(ctx, "cam1", store.InvertedTicksRows(nil, &boundary)); n == 0 {
			t.Errorf("%s: the uncommitted purge's rows are gone", name)
		}
		if _, err := jobs.Get(ctx, "j", "r"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: the uncommitted put: %v", name, err)
		}
		checkTally(t, db, images)
		db.Close()
	}
}

// TestTalliedTablesRefuseOtherDeletes: nothing deletes a tallied table's
// rows without their tallies.
func TestTalliedTablesRefuseOtherDeletes(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	key := store.Key{PartitionKey: "cam", RowKey: store.InvertedTicksRowKey(day0)}
	for name, stage := range map[string]func(b store.PurgeBatch) error{
		"batch DeletePartitions": func(b store.PurgeBatch) error { return b.DeletePartitions(images.Name(), store.Range{}) },
		"batch Delete":           func(b store.PurgeBatch) error { _, err := b.Delete(images.Name(), key); return err },
		"batch Put": func(b store.PurgeBatch) error {
			_, err := b.Put(images.Name(), store.Entity{PartitionKey: key.PartitionKey, RowKey: key.RowKey})
			return err
		},
	} {
		err := db.Exclusive(ctx, time.Time{}, func(_ context.Context, b store.PurgeBatch) error { return stage(b) })
		if !errors.Is(err, pebble.ErrTallied) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := db.Tally(ctx, "no such name!"); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Tally of a table name the store refuses: %v", err)
	}
}

// TestBatchDeletesAndPuts: Delete answers for the batch as staged, and
// Put stamps the entity as any write does.
func TestBatchDeletesAndPuts(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	ctx := t.Context()
	jobs, _ := db.Table(ctx, "Jobs")
	for _, rk := range []string{"a", "b"} {
		if _, err := jobs.Insert(ctx, store.Entity{PartitionKey: "p", RowKey: rk}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := jobs.Insert(ctx, store.Entity{PartitionKey: "q", RowKey: "a"}); err != nil {
		t.Fatal(err)
	}
	var put store.Entity
	err := db.Exclusive(ctx, time.Time{}, func(_ context.Context, b store.PurgeBatch) error {
		check := func(key store.Key, want bool) error {
			if got, err := b.Delete(jobs.Name(), key); err != nil || got != want {
				return fmt.Errorf("Delete(%v) = %v, %v; want %v", key, got, err, want)
			}
			return nil
		}
		var err error
		if err = errors.Join(check(store.Key{PartitionKey: "p", RowKey: "a"}, true), check(store.Key{PartitionKey: "p", RowKey: "a"}, false),
			check(store.Key{PartitionKey: "p", RowKey: "missing"}, false)); err != nil {
			return err
		}
		if put, err = b.Put(jobs.Name(), store.Entity{PartitionKey: "p", RowKey: "c", Properties: store.Properties{"N": int32(1)}}); err != nil {
			return err
		}
		if err := b.DeletePartitions(jobs.Name(), store.Range{From: "q"}); err != nil {
			return err
		}
		if _, err := b.Put(jobs.Name(), store.Entity{PartitionKey: "p", RowKey: ""}); err == nil {
			return errors.New("Put of an invalid entity: no error")
		}
		return errors.Join(check(store.Key{PartitionKey: "p", RowKey: "c"}, true), check(store.Key{PartitionKey: "q", RowKey: "a"}, false))
	})
	if err != nil {
		t.Fatal(err)
	}
	if put.ETag == "" || put.Timestamp.IsZero() {
		t.Errorf("Put returned %+v, unstamped", put)
	}
	page, err := jobs.Scan(ctx, store.Scan{Limit: 10})
	if err != nil || len(page.Entities) != 1 || page.Entities[0].RowKey != "b" {
		t.Fatalf("after the batch: %+v, %v; want p/b alone", page.Entities, err)
	}
}

// TestCheckpointTablesLeaveTalliesOut: a checkpoint's table list names
// tables, not the tallies' key space.
func TestCheckpointTablesLeaveTalliesOut(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(pebble.Options{Dir: filepath.Join(dir, "db")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	images, _ := db.Table(ctx, "Images")
	if err := db.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	fill(t, images, 10)
	if err := db.Checkpoint(filepath.Join(dir, "copy")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	names, err := pebble.Tables(filepath.Join(dir, "copy"))
	if err != nil || !slices.Equal(names, []string{"images"}) {
		t.Fatalf("Tables = %v, %v; want [images]", names, err)
	}
	_ = os.RemoveAll(dir)
}
