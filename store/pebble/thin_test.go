package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// captured lists the capture instants of a partition's rows, oldest first.
func captured(t *testing.T, tbl store.Table, partition string) []time.Time {
	t.Helper()
	var out []time.Time
	q := store.Query{PartitionKey: partition}
	for {
		page, err := tbl.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entities {
			at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, at.UTC())
		}
		if page.Next == nil {
			slices.Reverse(out)
			return out
		}
		q.Resume = page.Next
	}
}

// tallied is the partition's tallied rows of day0, by minute of the day.
func tallied(t *testing.T, db interface {
	Exclusive(context.Context, time.Time, func(context.Context, store.PurgeBatch) error) error
}, tbl store.Table, partition string) map[int]int32 {
	t.Helper()
	got := map[int]int32{}
	err := db.Exclusive(t.Context(), day0, func(ctx context.Context, b store.PurgeBatch) error {
		return b.Tallies(ctx, tbl.Name(), store.Range{}, day0, func(d *store.DayTally) error {
			for _, m := range d.Minutes {
				if d.PartitionKey != partition {
					break
				}
				got[m.Minute] = m.Rows
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestThinRowsKeepsOnePerInterval: of a camera's image a minute, thinning
// to one per 15 minutes keeps the first of each interval (an earlier image
// that arrives late takes its place at the next pass, and prefer picks the
// earliest it likes), deletes the rest, returns their keys for the index,
// leaves other cameras alone, and keeps the tallies equal to the rows; a
// second pass deletes nothing.
func TestThinRowsKeepsOnePerInterval(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	insert := func(partition string, at time.Time, props store.Properties) {
		t.Helper()
		if _, err := images.Insert(ctx, store.Entity{PartitionKey: partition, RowKey: store.InvertedTicksRowKey(at), Properties: props}); err != nil {
			t.Fatal(err)
		}
	}
	for m := range 120 {
		at := day0.Add(time.Duration(m)*time.Minute + 10*time.Second)
		insert("cam", at, nil)
		insert("other", at, nil)
	}
	insert("cam", day0.Add(20*time.Second), nil) // a second image in minute 0
	thin := func(prefer func(store.Entity) bool) []string {
		t.Helper()
		var deleted []string
		err := db.Exclusive(ctx, day0, func(ctx context.Context, b store.PurgeBatch) error {
			var err error
			deleted, err = b.ThinRows(ctx, images.Name(), "cam", day0, day0.Add(2*time.Hour), 15*time.Minute, prefer)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return deleted
	}
	wantKept := func(kept ...time.Time) {
		t.Helper()
		if got := captured(t, images, "cam"); !slices.EqualFunc(got, kept, time.Time.Equal) {
			t.Fatalf("kept %v, want %v", got, kept)
		}
		want := map[int]int32{}
		for _, at := range kept {
			want[int(at.Sub(day0)/time.Minute)]++
		}
		if got := tallied(t, db, images, "cam"); !maps(got, want) {
			t.Fatalf("tally %v after thinning, want %v (the rows kept)", got, want)
		}
	}
	var firsts []time.Time
	for i := range 8 {
		firsts = append(firsts, day0.Add(time.Duration(i)*15*time.Minute+10*time.Second))
	}

	deleted := thin(nil)
	if len(deleted) != 121-8 {
		t.Fatalf("deleted %d rows, want %d", len(deleted), 121-8)
	}
	if newest := store.InvertedTicksRowKey(day0.Add(119*time.Minute + 10*time.Second)); deleted[0] != newest {
		t.Errorf("first deleted key %s, want the newest row's %s", deleted[0], newest)
	}
	wantKept(firsts...)
	if n := len(captured(t, images, "other")); n != 120 {
		t.Errorf("another camera keeps %d of its 120 rows", n)
	}
	if deleted := thin(nil); len(deleted) != 0 {
		t.Errorf("a second pass deleted %d rows", len(deleted))
	}

	// A late image earlier than an interval's keeper becomes its keeper.
	late := day0.Add(15*time.Minute + 5*time.Second)
	insert("cam", late, nil)
	if deleted := thin(nil); !slices.Equal(deleted, []string{store.InvertedTicksRowKey(firsts[1])}) {
		t.Errorf("after a late earlier image, deleted %v, want the old keeper", deleted)
	}
	firsts[1] = late
	wantKept(firsts...)

	// prefer picks the earliest image it likes, not the interval's first:
	// the images before and after it go.
	for _, at := range []time.Time{day0.Add(35 * time.Minute), day0.Add(40 * time.Minute)} {
		insert("cam", at, store.Properties{"Clear": true})
	}
	insert("cam", day0.Add(44*time.Minute), nil)
	clear := func(e store.Entity) bool { v, _ := e.Properties["Clear"].(bool); return v }
	if deleted := thin(clear); len(deleted) != 3 {
		t.Errorf("with a preference, deleted %d rows, want 3 (the first, the later clear one, the last)", len(deleted))
	}
	firsts[2] = day0.Add(35 * time.Minute)
	wantKept(firsts...)
}

func maps(a, b map[int]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestThinRowsRefusesBadBounds: intervals must be whole minutes dividing a
// day, the bounds on them and before the section's horizon, and the table
// tallied; a refused call stages nothing.
func TestThinRowsRefusesBadBounds(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	jobs, err := db.Table(ctx, "Jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := images.Insert(ctx, store.Entity{PartitionKey: "cam", RowKey: store.InvertedTicksRowKey(day0.Add(time.Minute))}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		tbl      store.Table
		from, to time.Time
		every    time.Duration
	}{
		{"interval not dividing a day", images, day0, day0.Add(7 * time.Hour), 7 * time.Minute},
		{"interval of seconds", images, day0, day0.Add(time.Hour), 90 * time.Second},
		{"from off a boundary", images, day0.Add(time.Minute), day0.Add(time.Hour), 15 * time.Minute},
		{"empty", images, day0.Add(time.Hour), day0.Add(time.Hour), 15 * time.Minute},
		{"past the horizon", images, day0, day0.Add(48 * time.Hour), 15 * time.Minute},
		{"untallied table", jobs, day0, day0.Add(time.Hour), 15 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := db.Exclusive(ctx, day0, func(ctx context.Context, b store.PurgeBatch) error {
				_, err := b.ThinRows(ctx, c.tbl.Name(), "cam", c.from, c.to, c.every, nil)
				return err
			})
			if err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if n := len(captured(t, images, "cam")); n != 1 {
		t.Errorf("the refused calls left %d rows, want 1", n)
	}
}

// TestDeleteUnreadDeletesWithoutARead: an untallied table's row goes by
// key in the stage's batch, a missing key costs nothing, and a tallied
// table is refused (its rows go with their tallies only).
func TestDeleteUnreadDeletesWithoutARead(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	index, err := db.Table(ctx, "Index")
	if err != nil {
		t.Fatal(err)
	}
	for _, rk := range []string{"a", "b"} {
		if _, err := index.Insert(ctx, store.Entity{PartitionKey: "p", RowKey: rk}); err != nil {
			t.Fatal(err)
		}
	}
	err = db.Exclusive(ctx, day0, func(ctx context.Context, b store.PurgeBatch) error {
		for _, rk := range []string{"a", "missing"} {
			if err := b.DeleteUnread(index.Name(), store.Key{PartitionKey: "p", RowKey: rk}); err != nil {
				return err
			}
		}
		if err := b.DeleteUnread(images.Name(), store.Key{PartitionKey: "cam", RowKey: "x"}); err == nil {
			t.Error("DeleteUnread of a tallied table's row was staged")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Get(ctx, "p", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted row: %v, want ErrNotFound", err)
	}
	if _, err := index.Get(ctx, "p", "b"); err != nil {
		t.Errorf("the other row: %v", err)
	}
}

// TestLiveBytesFollowsDeletes: the live data an empty store holds grows
// with its rows and, once a purge's deletions are settled, falls by about
// what they reclaim, from Pebble's own accounting.
func TestLiveBytesFollowsDeletes(t *testing.T) {
	db, err := pebble.Open(pebble.Options{Dir: t.TempDir(), MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	images, err := db.Table(ctx, "Images")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	settled := func() uint64 {
		t.Helper()
		var live uint64
		testwait.Until(t, time.Minute, func() error {
			var ok bool
			if live, ok = db.LiveBytes(); !ok {
				return errors.New("the estimate is not settled")
			}
			return nil
		})
		return live
	}
	empty := settled()
	for c := range 10 {
		for m := range 1000 {
			at := day0.Add(time.Duration(m) * time.Minute)
			if _, err := images.Insert(ctx, store.Entity{PartitionKey: fmt.Sprintf("cam-%d", c), RowKey: store.InvertedTicksRowKey(at),
				Properties: store.Properties{"BlobUri": fmt.Sprintf("https://blobs.example/cam-%d/%d.jpg", c, m)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	full := settled()
	if full < empty+100_000 {
		t.Fatalf("10,000 rows: %d live bytes, empty %d", full, empty)
	}
	cut := day0.Add(500 * time.Minute)
	err = db.Exclusive(ctx, cut, func(ctx context.Context, b store.PurgeBatch) error {
		return b.Tallies(ctx, images.Name(), store.Range{}, cut, func(d *store.DayTally) error {
			_, err := b.DeleteRowsBefore(images.Name(), d.PartitionKey, cut, []store.DayTally{*d})
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SettleDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	// The statistics of the flushed tombstones come in the background:
	// the estimate falls once they have.
	want := empty + (full-empty)*65/100
	testwait.Until(t, time.Minute, func() error {
		if live, ok := db.LiveBytes(); !ok || live > want {
			return fmt.Errorf("half the rows purged: %d live bytes (settled %v), was %d (empty %d): want at most %d", live, ok, full, empty, want)
		}
		return nil
	})
}
