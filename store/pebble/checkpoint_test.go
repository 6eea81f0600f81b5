package pebble_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestCheckpointListsItsTables: a checkpoint holds the rows written before
// it, and Tables names each table holding rows once, in order, without
// changing the checkpoint's files.
func TestCheckpointListsItsTables(t *testing.T) {
	db, err := pebble.Open(pebble.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range []string{"Zebra", "Apple", "AppleIndex"} {
		tbl, err := db.Table(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, pk := range []string{"a", "b"} {
			if _, err := tbl.Insert(t.Context(), store.Entity{PartitionKey: pk, RowKey: "r"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Table(t.Context(), "Empty"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "checkpoint")
	if err := db.Checkpoint(dir); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(dir); err == nil {
		t.Error("a second checkpoint into the same directory succeeded")
	}
	got, err := pebble.Tables(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"apple", "appleindex", "zebra"}; !slices.Equal(got, want) {
		t.Fatalf("tables %v, want %v", got, want)
	}
	copied, err := pebble.Open(pebble.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	tbl, _ := copied.Table(t.Context(), "Zebra")
	if _, err := tbl.Get(t.Context(), "b", "r"); err != nil {
		t.Fatalf("row written before the checkpoint: %v", err)
	}
}
