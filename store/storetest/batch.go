package storetest

import (
	"fmt"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// batchPartition holds the rows of the batch tests.
const batchPartition = "p"

// newBatchFixture opens a fresh table holding rows a, b, c and d of
// batchPartition, and returns an ETag that row a no longer has.
func newBatchFixture(t *testing.T, h Harness) (tbl store.Table, staleA string) {
	t.Helper()
	tbl = newTable(t, h)
	staleA = mustInsert(t, tbl, entity(key{batchPartition, "a"}, store.Properties{"V": int32(0)})).ETag
	mustUpsert(t, tbl, entity(key{batchPartition, "a"}, store.Properties{"V": int32(1), "W": "w"}), store.Replace)
	for _, rk := range []string{"b", "c", "d"} {
		mustInsert(t, tbl, entity(key{batchPartition, rk}, store.Properties{"V": int32(1), "W": "w"}))
	}
	return tbl, staleA
}

// op builds a batch operation on a row of batchPartition.
func op(kind store.OpKind, rowKey string, props store.Properties) store.Op {
	return store.Op{Kind: kind, Entity: entity(key{batchPartition, rowKey}, props)}
}

func withMode(o store.Op, mode store.WriteMode) store.Op { o.Mode = mode; return o }

func withIfMatch(o store.Op, etag string) store.Op { o.IfMatch = etag; return o }

func inserts(partitionKey string, n int) []store.Op {
	ops := make([]store.Op, n)
	for i := range ops {
		ops[i] = store.Op{Kind: store.OpInsert, Entity: entity(key{partitionKey, fmt.Sprintf("new%03d", i)}, nil)}
	}
	return ops
}

func testBatch(t *testing.T, h Harness) {
	t.Run("Applies", func(t *testing.T) {
		tbl, _ := newBatchFixture(t, h)
		before := map[string]store.Entity{}
		for _, e := range snapshot(t, tbl) {
			before[e.RowKey] = e
		}
		err := tbl.Batch(t.Context(), []store.Op{
			op(store.OpInsert, "e", store.Properties{"V": int32(5)}),
			withMode(op(store.OpUpsert, "a", store.Properties{"V": int32(2)}), store.Merge),
			withMode(op(store.OpUpsert, "b", store.Properties{"X": true}), store.Replace),
			withIfMatch(withMode(op(store.OpUpdate, "c", store.Properties{"V": int32(3)}), store.Replace), before["c"].ETag),
			withIfMatch(op(store.OpDelete, "d", nil), before["d"].ETag),
			withMode(op(store.OpUpsert, "f", store.Properties{"V": int32(6)}), store.Replace),
		})
		if err != nil {
			t.Fatalf("Batch: %v", err)
		}
		for _, tc := range []struct {
			row  string
			want store.Properties
		}{
			{"a", store.Properties{"V": int32(2), "W": "w"}},
			{"b", store.Properties{"X": true}},
			{"c", store.Properties{"V": int32(3)}},
			{"e", store.Properties{"V": int32(5)}},
			{"f", store.Properties{"V": int32(6)}},
		} {
			got := mustGet(t, tbl, key{batchPartition, tc.row})
			wantProps(t, "Get "+tc.row, got.Properties, tc.want)
			if old, ok := before[tc.row]; ok && got.ETag == old.ETag {
				t.Errorf("Get %s: ETag %q unchanged by the batch", tc.row, got.ETag)
			}
		}
		wantNotFound(t, tbl, key{batchPartition, "d"})
	})

	t.Run("UpdateMerge", func(t *testing.T) {
		tbl, _ := newBatchFixture(t, h)
		err := tbl.Batch(t.Context(), []store.Op{withMode(op(store.OpUpdate, "a", store.Properties{"V": int32(4)}), store.Merge)})
		if err != nil {
			t.Fatalf("Batch: %v", err)
		}
		wantProps(t, "Get a", mustGet(t, tbl, key{batchPartition, "a"}).Properties, store.Properties{"V": int32(4), "W": "w"})
	})

	t.Run("Empty", func(t *testing.T) {
		tbl, _ := newBatchFixture(t, h)
		before := snapshot(t, tbl)
		for _, ops := range [][]store.Op{nil, {}} {
			if err := tbl.Batch(t.Context(), ops); err != nil {
				t.Errorf("Batch(%#v): %v", ops, err)
			}
		}
		wantUnchanged(t, "after empty batches", tbl, before)
	})

	t.Run("FailingOp", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			ops   func(staleA string) []store.Op
			index int
			want  error
		}{
			{"insert of a taken key", func(string) []store.Op {
				return []store.Op{
					op(store.OpInsert, "x", nil),
					withMode(op(store.OpUpsert, "a", store.Properties{"V": int32(9)}), store.Merge),
					op(store.OpInsert, "b", nil),
				}
			}, 2, store.ErrAlreadyExists},
			{"delete of a missing row", func(string) []store.Op {
				return []store.Op{
					op(store.OpInsert, "x", nil),
					op(store.OpDelete, "missing", nil),
					withMode(op(store.OpUpsert, "a", nil), store.Replace),
				}
			}, 1, store.ErrNotFound},
			{"update of a missing row", func(string) []store.Op {
				return []store.Op{
					op(store.OpDelete, "b", nil),
					op(store.OpUpdate, "missing", store.Properties{"V": int32(9)}),
				}
			}, 1, store.ErrNotFound},
			{"update with a stale ETag", func(staleA string) []store.Op {
				return []store.Op{
					op(store.OpDelete, "b", nil),
					op(store.OpInsert, "x", nil),
					withIfMatch(op(store.OpUpdate, "a", store.Properties{"V": int32(9)}), staleA),
				}
			}, 2, store.ErrConflict},
			{"delete with a stale ETag", func(staleA string) []store.Op {
				return []store.Op{
					op(store.OpInsert, "x", nil),
					withIfMatch(op(store.OpDelete, "a", nil), staleA),
				}
			}, 1, store.ErrConflict},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tbl, staleA := newBatchFixture(t, h)
				before := snapshot(t, tbl)
				err := tbl.Batch(t.Context(), tc.ops(staleA))
				wantBatchError(t, "Batch", err, tc.index, tc.want)
				wantUnchanged(t, "after the rejected batch", tbl, before)
			})
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			ops  []store.Op
			// index, when not -1, is the operation the *store.BatchError names.
			index int
			want  error
		}{
			{"two partitions", []store.Op{
				op(store.OpInsert, "x", nil),
				{Kind: store.OpInsert, Entity: entity(key{batchPartition + "1", "x"}, nil)},
			}, -1, store.ErrInvalidBatch},
			{"over 100 operations", inserts(batchPartition, store.MaxBatchOps+1), -1, store.ErrInvalidBatch},
			{"same row twice", []store.Op{
				op(store.OpInsert, "x", nil),
				withMode(op(store.OpUpsert, "x", nil), store.Merge),
			}, -1, store.ErrInvalidBatch},
			{"delete then insert of a row", []store.Op{
				op(store.OpDelete, "a", nil),
				op(store.OpInsert, "a", nil),
			}, -1, store.ErrInvalidBatch},
			{"invalid key", []store.Op{
				op(store.OpInsert, "x", nil),
				op(store.OpInsert, "bad/key", nil),
			}, 1, store.ErrInvalidKey},
			{"invalid entity", []store.Op{
				op(store.OpInsert, "x", nil),
				op(store.OpInsert, "y", store.Properties{"Count": 1}),
			}, 1, store.ErrInvalidEntity},
			{"unknown operation kind", []store.Op{
				op(store.OpInsert, "x", nil),
				op(store.OpKind(42), "y", nil),
			}, 1, store.ErrInvalidBatch},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tbl, _ := newBatchFixture(t, h)
				before := snapshot(t, tbl)
				err := tbl.Batch(t.Context(), tc.ops)
				if tc.index >= 0 {
					wantBatchError(t, "Batch", err, tc.index, tc.want)
				} else {
					wantIs(t, "Batch", err, tc.want)
				}
				wantUnchanged(t, "after the rejected batch", tbl, before)
			})
		}
	})

	t.Run("MaxOps", func(t *testing.T) {
		tbl := newTable(t, h)
		ops := inserts(batchPartition, store.MaxBatchOps)
		if err := tbl.Batch(t.Context(), ops); err != nil {
			t.Fatalf("Batch of %d inserts: %v", len(ops), err)
		}
		want := make([]key, len(ops))
		for i, o := range ops {
			want[i] = keyOf(o.Entity)
		}
		wantKeys(t, "Query after the batch", queryAll(t, tbl, store.Query{PartitionKey: batchPartition}), want)
	})
}
