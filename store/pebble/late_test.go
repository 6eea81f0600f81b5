package pebble_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// TestWatchLateRecordsWritesBeforeItsInstant: a watch records the
// partitions written with a row captured before its instant, from its
// start to its stop, and no other; past what it keeps it says to read
// every partition.
func TestWatchLateRecordsWritesBeforeItsInstant(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	insert := func(pk string, at time.Time) {
		t.Helper()
		if _, err := images.Insert(ctx, store.Entity{PartitionKey: pk, RowKey: store.InvertedTicksRowKey(at)}); err != nil {
			t.Fatal(err)
		}
	}
	before := day0.Add(5 * 24 * time.Hour)
	insert("early", day0) // before the watch
	w, stop, err := db.WatchLate(images.Name(), before)
	if err != nil {
		t.Fatal(err)
	}
	insert("c", day0.Add(time.Hour))
	insert("a", before.Add(-time.Minute))
	insert("c", day0.Add(2*time.Hour))
	insert("new", before) // at the instant: not late
	if _, err := images.Upsert(ctx, store.Entity{PartitionKey: "b", RowKey: store.InvertedTicksRowKey(day0)}, store.Merge); err != nil {
		t.Fatal(err)
	}
	if late, all := w.Late(); all || !slices.Equal(late, []string{"a", "b", "c"}) {
		t.Errorf("watch recorded %q (all: %v), want a, b and c", late, all)
	}
	stop()
	insert("d", day0)
	if late, _ := w.Late(); slices.Contains(late, "d") {
		t.Errorf("a stopped watch recorded %q", late)
	}

	w, stop, err = db.WatchLate(images.Name(), before)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for i := range 5000 {
		insert(fmt.Sprintf("cam-%04d", i), day0.Add(3*time.Hour))
	}
	if late, all := w.Late(); !all || late != nil {
		t.Errorf("a watch of 5,000 partitions gave %d of them, want all", len(late))
	}
	if _, _, err := db.WatchLate("NotTallied", before); err == nil {
		t.Error("a watch of an untallied table was not refused")
	}
}

// TestTalliesOfVisitsTheNamedPartitions: TalliesOf visits, day by day,
// the tallies of exactly the partitions named, including after an
// earlier section deleted the partitions beside them.
func TestTalliesOfVisitsTheNamedPartitions(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	seedScatteredDays(t, images)
	through := day0.Add(9 * 24 * time.Hour)
	visitOf := func(names []string, purge bool) []string {
		t.Helper()
		var got []string
		err := db.Exclusive(ctx, through, func(ctx context.Context, b store.PurgeBatch) error {
			return b.TalliesOf(ctx, images.Name(), names, through, func(d *store.DayTally) error {
				got = append(got, d.Day.Format("0102")+d.PartitionKey)
				if !purge {
					return nil
				}
				_, err := b.DeleteRowsBefore(images.Name(), d.PartitionKey, through, []store.DayTally{*d})
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := visitOf([]string{"b", "d"}, true), []string{"0501b", "0501d", "0502b", "0504b"}; !slices.Equal(got, want) {
		t.Errorf("b and d: visited %v, want %v", got, want)
	}
	if got, want := visitOf([]string{"a", "b", "bb", "e"}, false), []string{"0501a", "0501e", "0502a", "0504a", "0507e", "0509e"}; !slices.Equal(got, want) {
		t.Errorf("a, b (purged), bb (none) and e: visited %v, want %v", got, want)
	}
	if got := visitOf(nil, false); len(got) != 0 {
		t.Errorf("no partitions: visited %v", got)
	}
}
