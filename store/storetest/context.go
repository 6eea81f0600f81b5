package storetest

import (
	"context"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// testCancelledContext checks that every method gives up on a cancelled
// context with an error wrapping context.Canceled, so that callers tell a
// shutdown from a storage failure, and that no write happens after it.
func testCancelledContext(t *testing.T, h Harness) {
	tbl := newTable(t, h)
	existing := key{"cam1", "existing"}
	fresh := key{"cam1", "fresh"}
	stored := mustInsert(t, tbl, entity(existing, store.Properties{"V": int32(1)}))
	before := snapshot(t, tbl)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Insert", func(ctx context.Context) error { _, err := tbl.Insert(ctx, entity(fresh, nil)); return err }},
		{"Upsert", func(ctx context.Context) error {
			_, err := tbl.Upsert(ctx, entity(existing, store.Properties{"V": int32(2)}), store.Replace)
			return err
		}},
		{"Update", func(ctx context.Context) error {
			_, err := tbl.Update(ctx, entity(existing, store.Properties{"V": int32(2)}), store.Replace, stored.ETag)
			return err
		}},
		{"Delete", func(ctx context.Context) error { return tbl.Delete(ctx, existing.PartitionKey, existing.RowKey, "") }},
		{"Batch", func(ctx context.Context) error {
			return tbl.Batch(ctx, []store.Op{{Kind: store.OpInsert, Entity: entity(fresh, nil)}})
		}},
		{"Get", func(ctx context.Context) error {
			_, err := tbl.Get(ctx, existing.PartitionKey, existing.RowKey)
			return err
		}},
		{"Query", func(ctx context.Context) error {
			_, err := tbl.Query(ctx, store.Query{PartitionKey: "cam1"})
			return err
		}},
		{"Scan", func(ctx context.Context) error { _, err := tbl.Scan(ctx, store.Scan{}); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantIs(t, tc.name+" with a cancelled context", tc.call(ctx), context.Canceled)
			wantUnchanged(t, tc.name+" with a cancelled context", tbl, before)
		})
	}
}
