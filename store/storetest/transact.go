package storetest

import (
	"fmt"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// newTransactor opens a fresh backend that implements store.Transactor and
// two of its tables, shaped like an entity table and its minute index.
func newTransactor(t *testing.T, h Harness) (tx store.Transactor, images, index store.Table) {
	t.Helper()
	b := h(t)
	tx, ok := b.(store.Transactor)
	if !ok {
		t.Fatalf("backend %T stopped implementing store.Transactor", b)
	}
	return tx, openTable(t, b, "images"), openTable(t, b, "byminute")
}

func tableOp(tbl store.Table, kind store.OpKind, k key, props store.Properties) store.TableOp {
	return store.TableOp{Table: tbl, Op: store.Op{Kind: kind, Entity: entity(k, props)}}
}

func testTransactor(t *testing.T, h Harness) {
	b := h(t)
	if _, ok := b.(store.Transactor); !ok {
		t.Skipf("backend %T does not implement store.Transactor; callers fall back to ordered single-table writes", b)
	}

	t.Run("Commits", func(t *testing.T) {
		tx, images, index := newTransactor(t, h)
		mustInsert(t, images, entity(key{"cam1", "r0"}, store.Properties{"V": int32(1), "W": "w"}))
		mustInsert(t, index, entity(key{"202601010000", "cam1_r0"}, nil))
		merge := tableOp(images, store.OpUpsert, key{"cam1", "r0"}, store.Properties{"V": int32(2)})
		merge.Op.Mode = store.Merge
		err := tx.Transact(t.Context(), []store.TableOp{
			tableOp(images, store.OpInsert, key{"cam1", "r1"}, store.Properties{"V": int32(1)}),
			tableOp(index, store.OpInsert, key{"202601010001", "cam1_r1"}, nil),
			tableOp(images, store.OpInsert, key{"cam2", "r1"}, nil),
			merge,
			tableOp(index, store.OpDelete, key{"202601010000", "cam1_r0"}, nil),
			// The same key as the first operation, in the other table: a distinct row.
			tableOp(index, store.OpInsert, key{"cam1", "r1"}, nil),
		})
		if err != nil {
			t.Fatalf("Transact: %v", err)
		}
		wantKeys(t, "Scan images", scanAll(t, images, store.Scan{}), []key{{"cam1", "r0"}, {"cam1", "r1"}, {"cam2", "r1"}})
		wantKeys(t, "Scan byminute", scanAll(t, index, store.Scan{}), []key{{"202601010001", "cam1_r1"}, {"cam1", "r1"}})
		wantProps(t, "Get images cam1/r0", mustGet(t, images, key{"cam1", "r0"}).Properties, store.Properties{"V": int32(2), "W": "w"})
	})

	t.Run("Empty", func(t *testing.T) {
		tx, _, _ := newTransactor(t, h)
		if err := tx.Transact(t.Context(), nil); err != nil {
			t.Errorf("Transact(nil): %v", err)
		}
	})

	t.Run("FailingOp", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			ops   func(images, index store.Table, stale string) []store.TableOp
			index int
			want  error
		}{
			{"insert of a taken key", func(images, index store.Table, _ string) []store.TableOp {
				return []store.TableOp{
					tableOp(images, store.OpInsert, key{"cam1", "r1"}, nil),
					tableOp(index, store.OpUpsert, key{"202601010001", "cam1_r1"}, nil),
					tableOp(index, store.OpInsert, key{"202601010000", "cam1_r0"}, nil),
				}
			}, 2, store.ErrAlreadyExists},
			{"update with a stale ETag", func(images, index store.Table, stale string) []store.TableOp {
				update := tableOp(images, store.OpUpdate, key{"cam1", "r0"}, store.Properties{"V": int32(9)})
				update.Op.IfMatch = stale
				return []store.TableOp{tableOp(index, store.OpDelete, key{"202601010000", "cam1_r0"}, nil), update}
			}, 1, store.ErrConflict},
			{"delete of a missing row", func(images, index store.Table, _ string) []store.TableOp {
				return []store.TableOp{
					tableOp(images, store.OpInsert, key{"cam2", "r1"}, nil),
					tableOp(index, store.OpDelete, key{"202601010000", "missing"}, nil),
				}
			}, 1, store.ErrNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tx, images, index := newTransactor(t, h)
				stale := mustInsert(t, images, entity(key{"cam1", "r0"}, store.Properties{"V": int32(0)})).ETag
				mustUpsert(t, images, entity(key{"cam1", "r0"}, store.Properties{"V": int32(1)}), store.Replace)
				mustInsert(t, index, entity(key{"202601010000", "cam1_r0"}, nil))
				beforeImages, beforeIndex := snapshot(t, images), snapshot(t, index)
				err := tx.Transact(t.Context(), tc.ops(images, index, stale))
				wantBatchError(t, "Transact", err, tc.index, tc.want)
				wantUnchanged(t, "images after the rejected transaction", images, beforeImages)
				wantUnchanged(t, "byminute after the rejected transaction", index, beforeIndex)
			})
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			ops  func(images, index store.Table) []store.TableOp
		}{
			{"over 100 operations", func(images, index store.Table) []store.TableOp {
				ops := make([]store.TableOp, store.MaxBatchOps+1)
				for i := range ops {
					tbl := images
					if i%2 == 1 {
						tbl = index
					}
					ops[i] = tableOp(tbl, store.OpInsert, key{"cam1", fmt.Sprintf("r%03d", i)}, nil)
				}
				return ops
			}},
			{"same row twice in one table", func(images, index store.Table) []store.TableOp {
				return []store.TableOp{
					tableOp(images, store.OpInsert, key{"cam1", "r1"}, nil),
					tableOp(index, store.OpInsert, key{"cam1", "r1"}, nil),
					tableOp(images, store.OpUpsert, key{"cam1", "r1"}, nil),
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tx, images, index := newTransactor(t, h)
				err := tx.Transact(t.Context(), tc.ops(images, index))
				wantIs(t, "Transact", err, store.ErrInvalidBatch)
				wantUnchanged(t, "images after the rejected transaction", images, nil)
				wantUnchanged(t, "byminute after the rejected transaction", index, nil)
			})
		}
	})
}
