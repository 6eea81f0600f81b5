package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}

func TestConformanceOnDisk(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		db, err := pebble.Open(pebble.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}

// TestAcknowledgedWritesSurviveCrash takes the filesystem as a power loss
// would leave it, holding only what was synced, right after concurrent
// writes returned: every acknowledged write must be there.
func TestAcknowledgedWritesSurviveCrash(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	primary, _ := db.Table(ctx, "Primary")
	index, _ := db.Table(ctx, "PrimaryIndex")
	const writers, perWriter = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				pk, rk := fmt.Sprintf("cam%d", w), fmt.Sprintf("%04d", i)
				err := db.Transact(ctx, []store.TableOp{
					{Table: index, Op: store.Op{Kind: store.OpUpsert, Entity: store.Entity{PartitionKey: "m", RowKey: rk + "_" + pk}}},
					{Table: primary, Op: store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: pk, RowKey: rk,
						Properties: store.Properties{"N": int32(i)}}}},
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	db.Close()

	db, err = pebble.Open(pebble.Options{Dir: "db", FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	primary, _ = db.Table(ctx, "Primary")
	index, _ = db.Table(ctx, "PrimaryIndex")
	for w := range writers {
		for i := range perWriter {
			pk, rk := fmt.Sprintf("cam%d", w), fmt.Sprintf("%04d", i)
			e, err := primary.Get(ctx, pk, rk)
			if err != nil || e.Properties["N"] != int32(i) {
				t.Fatalf("primary %s/%s after crash: %+v, %v", pk, rk, e, err)
			}
			if _, err := index.Get(ctx, "m", rk+"_"+pk); err != nil {
				t.Fatalf("index %s_%s after crash: %v", rk, pk, err)
			}
		}
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := pebble.Open(pebble.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := db.Table(ctx, "Things")
	written, err := tbl.Insert(ctx, store.Entity{PartitionKey: "p", RowKey: "r", Properties: store.Properties{"A": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = pebble.Open(pebble.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tbl, _ = db.Table(ctx, "Things")
	got, err := tbl.Get(ctx, "p", "r")
	if err != nil || got.ETag != written.ETag || got.Properties["A"] != "b" {
		t.Fatalf("after reopen: %+v, %v; want etag %s", got, err, written.ETag)
	}
	if _, err := tbl.Insert(ctx, written); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("insert after reopen: %v, want ErrAlreadyExists", err)
	}
}
