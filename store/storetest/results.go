package storetest

import (
	"context"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// testWriteResults checks what a write returns. Azure answers a Merge
// (Merge Entity, Insert Or Merge Entity) with 204 No Content and the new
// ETag, never the merged entity, and reading it back would cost a request;
// so on every backend a write returns the entity as the caller wrote it,
// stamped with the new ETag and Timestamp, and a Get reads the merged set.
func testWriteResults(t *testing.T, h Harness) {
	k := key{"cam1", "r1"}
	stored := store.Properties{"Kept": "old", "Changed": int32(1)}
	write := store.Properties{"Changed": int32(2), "Added": true}
	merged := store.Properties{"Kept": "old", "Changed": int32(2), "Added": true}
	for _, tc := range []struct {
		name string
		mode store.WriteMode
		call func(ctx context.Context, tbl store.Table, e store.Entity, mode store.WriteMode) (store.Entity, error)
		// stored is what a Get reads after the write.
		stored store.Properties
	}{
		{"UpsertMerge", store.Merge, upsert, merged},
		{"UpsertReplace", store.Replace, upsert, write},
		{"UpdateMerge", store.Merge, update, merged},
		{"UpdateReplace", store.Replace, update, write},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := newTable(t, h)
			mustInsert(t, tbl, entity(k, stored))
			got, err := tc.call(t.Context(), tbl, entity(k, write), tc.mode)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			wantStamped(t, tc.name, got)
			if keyOf(got) != k {
				t.Errorf("%s returned key %s, want %s", tc.name, keyOf(got), k)
			}
			wantProps(t, tc.name+" returned", got.Properties, write)
			read := mustGet(t, tbl, k)
			wantProps(t, "Get after "+tc.name, read.Properties, tc.stored)
			if read.ETag != got.ETag {
				t.Errorf("Get after %s: ETag %q, want %q as the write returned", tc.name, read.ETag, got.ETag)
			}
		})
	}

	t.Run("Insert", func(t *testing.T) {
		tbl := newTable(t, h)
		got := mustInsert(t, tbl, entity(k, write))
		wantProps(t, "Insert returned", got.Properties, write)
		if read := mustGet(t, tbl, k); read.ETag != got.ETag {
			t.Errorf("Get after Insert: ETag %q, want %q as Insert returned", read.ETag, got.ETag)
		}
	})
}

func upsert(ctx context.Context, tbl store.Table, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	return tbl.Upsert(ctx, e, mode)
}

func update(ctx context.Context, tbl store.Table, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	return tbl.Update(ctx, e, mode, "")
}
