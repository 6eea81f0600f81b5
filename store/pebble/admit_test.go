package pebble_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestAdmitWriteRefusesWritesThatAddData checks the free-space hook: while
// it refuses, inserts, upserts and updates fail with ErrInsufficientStorage
// and write nothing, while reads and deletes (how space comes back) go on.
func TestAdmitWriteRefusesWritesThatAddData(t *testing.T) {
	// The store's own goroutines ask the hook too (its flush marks).
	var refuse atomic.Bool
	errFull := errors.New("disk nearly full")
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), AdmitWrite: func(context.Context) error {
		if refuse.Load() {
			return errFull
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	table, err := db.Table(ctx, "Rows")
	if err != nil {
		t.Fatal(err)
	}
	row := func(rk string) store.Entity {
		return store.Entity{PartitionKey: "p", RowKey: rk, Properties: store.Properties{"v": "x"}}
	}
	for _, rk := range []string{"a", "b"} {
		if _, err := table.Insert(ctx, row(rk)); err != nil {
			t.Fatal(err)
		}
	}

	refuse.Store(true)
	writes := map[string]func() error{
		"insert": func() error { _, err := table.Insert(ctx, row("c")); return err },
		"upsert": func() error { _, err := table.Upsert(ctx, row("c"), store.Replace); return err },
		"update": func() error { _, err := table.Update(ctx, row("a"), store.Merge, "*"); return err },
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, store.ErrInsufficientStorage) || !errors.Is(err, errFull) {
			t.Errorf("%s while refused: %v, want ErrInsufficientStorage wrapping the hook's error", name, err)
		}
	}
	if _, err := table.Get(ctx, "p", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused write was stored: Get = %v", err)
	}
	if _, err := table.Get(ctx, "p", "a"); err != nil {
		t.Errorf("read while refused: %v", err)
	}
	if err := table.Delete(ctx, "p", "b", "*"); err != nil {
		t.Errorf("delete while refused: %v", err)
	}

	refuse.Store(false)
	if _, err := table.Insert(ctx, row("c")); err != nil {
		t.Errorf("insert once admitted again: %v", err)
	}
}
