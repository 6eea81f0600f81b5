package pebble_test

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// instantFirst is what a purge batch of db says of the table.
func instantFirst(t *testing.T, db *pebble.DB, table string) bool {
	t.Helper()
	var got bool
	err := db.Exclusive(t.Context(), time.Time{}, func(_ context.Context, b store.PurgeBatch) error {
		got = b.InstantFirst(table)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// indexKey is a row key of a capture instant at day0 plus m minutes and 7
// seconds, in this service's index form or the fleet's, with its
// partition, the capture minute.
func indexKey(m int, camera string, fleet bool) store.Key {
	at := day0.Add(time.Duration(m)*time.Minute + 7*time.Second)
	row := store.InvertedTicksRowKey(at) + "_" + camera
	if fleet {
		row = camera + "_" + store.InvertedTicksRowKey(at)
	}
	return store.Key{PartitionKey: store.MinutePartitionKey(at), RowKey: row}
}

// TestInstantFirstFollowsTheIndexRows: a minute-keyed table declared while
// empty is instant-first, through writes of this service's index form
// (sharded partitions too) and across a reopen; one row of another form
// (the fleet's, a 19-digit camera that reads both ways, an instant of
// another minute), written by a process that never declared the table or
// by a purge batch, ends it for good, and a table declared with rows
// never is.
func TestInstantFirstFollowsTheIndexRows(t *testing.T) {
	ninteenDigits := store.InvertedTicksRowKey(day0.Add(3*time.Minute + 30*time.Second))
	cases := []struct {
		name string
		key  store.Key
		// viaBatch writes the row with a purge batch's Put.
		viaBatch bool
		want     bool
	}{
		{name: "own form", key: indexKey(3, "cam-1", false), want: true},
		{name: "own form, sharded partition", key: store.Key{PartitionKey: indexKey(3, "cam-1", false).PartitionKey + "_2",
			RowKey: indexKey(3, "cam-1", false).RowKey}, want: true},
		{name: "own form with a camera id of underscores", key: indexKey(3, "cam_1_x", false), want: true},
		{name: "fleet form", key: indexKey(3, "cam-1", true), want: false},
		{name: "fleet form by a purge batch", key: indexKey(3, "cam-1", true), viaBatch: true, want: false},
		{name: "a 19-digit camera of the same minute", key: indexKey(3, ninteenDigits, false), want: false},
		{name: "an instant of another minute", key: store.Key{PartitionKey: indexKey(4, "c", false).PartitionKey,
			RowKey: indexKey(3, "c", false).RowKey}, want: false},
		{name: "no instant", key: store.Key{PartitionKey: indexKey(3, "c", false).PartitionKey, RowKey: "x"}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			db := openMem(t, fs)
			if err := db.MinuteKeyed(t.Context(), "Index"); err != nil {
				t.Fatal(err)
			}
			if !instantFirst(t, db, "Index") {
				t.Fatal("an empty table declared minute-keyed is not instant-first")
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// A process that never declares the table: a copy into the store.
			db = openMem(t, fs)
			index, err := db.Table(t.Context(), "Index")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := index.Insert(t.Context(), store.Entity{PartitionKey: indexKey(1, "cam-0", false).PartitionKey,
				RowKey: indexKey(1, "cam-0", false).RowKey}); err != nil {
				t.Fatal(err)
			}
			e := store.Entity{PartitionKey: tc.key.PartitionKey, RowKey: tc.key.RowKey}
			if tc.viaBatch {
				err = db.Exclusive(t.Context(), time.Time{}, func(_ context.Context, b store.PurgeBatch) error {
					_, err := b.Put("Index", e)
					return err
				})
			} else {
				_, err = index.Upsert(t.Context(), e, store.Replace)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := instantFirst(t, db, "Index"); got != tc.want {
				t.Errorf("after the write: instant-first %v, want %v", got, tc.want)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openMem(t, fs)
			defer db.Close()
			if err := db.MinuteKeyed(t.Context(), "Index"); err != nil {
				t.Fatal(err)
			}
			if got := instantFirst(t, db, "Index"); got != tc.want {
				t.Errorf("reopened and declared again: instant-first %v, want %v", got, tc.want)
			}
		})
	}
}

// TestInstantFirstNeedsAnEmptyTable: a table that held rows before its
// first declaration is not known to be instant-first, whatever its rows,
// nor is a table never declared.
func TestInstantFirstNeedsAnEmptyTable(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	index, err := db.Table(t.Context(), "Index")
	if err != nil {
		t.Fatal(err)
	}
	k := indexKey(1, "cam-0", false)
	if _, err := index.Insert(t.Context(), store.Entity{PartitionKey: k.PartitionKey, RowKey: k.RowKey}); err != nil {
		t.Fatal(err)
	}
	if instantFirst(t, db, "Index") {
		t.Error("a table never declared is instant-first")
	}
	if err := db.MinuteKeyed(t.Context(), "Index"); err != nil {
		t.Fatal(err)
	}
	if instantFirst(t, db, "Index") {
		t.Error("a table declared with rows is instant-first")
	}
}
