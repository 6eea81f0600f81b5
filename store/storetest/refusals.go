package storetest

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// errLacks marks a refusal of an optional interface the backend lacks.
var errLacks = errors.New("storetest: the backend lacks this interface")

// refusals are inputs the contract refuses, each with the sentinel its
// error wraps. call runs one against a backend b, its table tbl, and a
// table of another backend.
var refusals = []struct {
	name string
	want error
	call func(ctx context.Context, b store.Backend, tbl, foreign store.Table) error
}{
	{"table name with a dash", store.ErrInvalidKey, func(ctx context.Context, b store.Backend, _, _ store.Table) error {
		_, err := b.Table(ctx, "bad-name")
		return err
	}},
	{"insert of a row key with a slash", store.ErrInvalidKey, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Insert(ctx, entity(key{"p", "a/b"}, nil))
		return err
	}},
	{"get of an empty partition key", store.ErrInvalidKey, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Get(ctx, "", "r")
		return err
	}},
	{"delete of an over-long row key", store.ErrInvalidKey, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		return tbl.Delete(ctx, "p", strings.Repeat("k", store.MaxKeyBytes), "")
	}},
	{"insert over 1 MiB", store.ErrTooLarge, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Insert(ctx, entity(key{"p", "r"}, oversized()))
		return err
	}},
	{"upsert of an int property", store.ErrInvalidEntity, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Upsert(ctx, entity(key{"p", "r"}, store.Properties{"N": 1}), store.Replace)
		return err
	}},
	{"upsert in an unknown write mode", store.ErrInvalidBatch, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Upsert(ctx, entity(key{"p", "r"}, nil), store.WriteMode(7))
		return err
	}},
	{"update in an unknown write mode", store.ErrInvalidBatch, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Update(ctx, entity(key{"p", "r"}, nil), store.WriteMode(7), "")
		return err
	}},
	{"query of an invalid partition key", store.ErrInvalidKey, query(store.Query{PartitionKey: "a#b"})},
	{"query with limit -1", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Limit: -1})},
	{"query with limit 1001", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Limit: store.MaxPageSize + 1})},
	{"query resumed from another partition", store.ErrInvalidQuery,
		query(store.Query{PartitionKey: "p", Resume: &store.Cursor{PartitionKey: "q", RowKey: "r"}})},
	{"query resumed at a row key with NUL", store.ErrInvalidQuery,
		query(store.Query{PartitionKey: "p", Resume: &store.Cursor{PartitionKey: "p", RowKey: "r\x00"}})},
	{"query from a row bound with a hash", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Rows: store.Range{From: "a#"}})},
	{"query to a row bound of invalid UTF-8", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Rows: store.Range{To: "\xff"}})},
	{"query on a system property", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Where: []store.Equal{eq("RowKey", "r")}})},
	{"query on an invalid property name", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Where: []store.Equal{eq("bad-name", "x")}})},
	{"query on an int value", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Where: []store.Equal{eq("N", 1)}})},
	{"query on a nil value", store.ErrInvalidQuery, query(store.Query{PartitionKey: "p", Where: []store.Equal{eq("N", nil)}})},
	{"scan with limit 1001", store.ErrInvalidQuery, scan(store.Scan{Limit: store.MaxPageSize + 1})},
	{"scan to a partition bound with a question mark", store.ErrInvalidQuery, scan(store.Scan{Partitions: store.Range{To: "a?"}})},
	{"scan resumed at an empty partition key", store.ErrInvalidQuery, scan(store.Scan{Resume: &store.Cursor{RowKey: "r"}})},
	{"scan on a system property", store.ErrInvalidQuery, scan(store.Scan{Where: []store.Equal{eq("PartitionKey", "p")}})},
	{"batch over 100 operations", store.ErrInvalidBatch, batch(inserts(batchPartition, store.MaxBatchOps+1)...)},
	{"batch across partitions", store.ErrInvalidBatch, batch(op(store.OpInsert, "a", nil),
		store.Op{Kind: store.OpInsert, Entity: entity(key{"other", "b"}, nil)})},
	{"batch with a row twice", store.ErrInvalidBatch, batch(op(store.OpInsert, "a", nil), op(store.OpDelete, "a", nil))},
	{"batch of an unknown kind", store.ErrInvalidBatch, batch(store.Op{Kind: store.OpKind(9), Entity: entity(key{batchPartition, "a"}, nil)})},
	{"batch in an unknown write mode", store.ErrInvalidBatch, batch(withMode(op(store.OpUpsert, "a", nil), store.WriteMode(7)))},
	{"batch with a NaN", store.ErrInvalidEntity, batch(op(store.OpInsert, "a", store.Properties{"F": math.NaN()}))},
	{"transaction with a table of another backend", store.ErrInvalidBatch, func(ctx context.Context, b store.Backend, tbl, foreign store.Table) error {
		tx, ok := b.(store.Transactor)
		if !ok {
			return errLacks
		}
		return tx.Transact(ctx, []store.TableOp{tableOp(tbl, store.OpInsert, key{"p", "a"}, nil), tableOp(foreign, store.OpInsert, key{"p", "b"}, nil)})
	}},
	{"transaction in an unknown write mode", store.ErrInvalidBatch, func(ctx context.Context, b store.Backend, tbl, _ store.Table) error {
		tx, ok := b.(store.Transactor)
		if !ok {
			return errLacks
		}
		upsert := tableOp(tbl, store.OpUpsert, key{"p", "a"}, nil)
		upsert.Op.Mode = store.WriteMode(7)
		return tx.Transact(ctx, []store.TableOp{upsert})
	}},
	{"count of an invalid partition key", store.ErrInvalidKey, func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		c, ok := tbl.(store.Counter)
		if !ok {
			return errLacks
		}
		_, err := c.CountRows(ctx, "a\nb", store.Range{})
		return err
	}},
	{"scan selecting a system property", store.ErrInvalidQuery, scan(store.Scan{Select: []string{"Timestamp"}})},
	{"scan with a condition on an unselected property", store.ErrInvalidQuery,
		scan(store.Scan{Select: []string{"A"}, Where: []store.Equal{{Property: "B", Value: "x"}}})},
}

func query(q store.Query) func(context.Context, store.Backend, store.Table, store.Table) error {
	return func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Query(ctx, q)
		return err
	}
}

func scan(s store.Scan) func(context.Context, store.Backend, store.Table, store.Table) error {
	return func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error {
		_, err := tbl.Scan(ctx, s)
		return err
	}
}

func batch(ops ...store.Op) func(context.Context, store.Backend, store.Table, store.Table) error {
	return func(ctx context.Context, _ store.Backend, tbl, _ store.Table) error { return tbl.Batch(ctx, ops) }
}

// testRefusals checks that a backend refuses each input with the error of
// the portable layer, word for word, and writes nothing: the layer checks
// once for every backend, so two backends cannot answer one input
// differently. The reference is store.NewBackend over an engine that fails
// the test if a refused input ever reaches it.
func testRefusals(t *testing.T, h Harness) {
	b := h(t)
	tbl := openTable(t, b, tableName)
	ref := reference(t)
	refTable := openTable(t, ref, tableName)
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.call(t.Context(), b, tbl, refTable)
			if errors.Is(got, errLacks) {
				t.Skip("the backend lacks the interface this refusal is of")
			}
			want := tc.call(t.Context(), ref, refTable, tbl)
			if !wantIs(t, "the backend", got, tc.want) || !wantIs(t, "the portable layer", want, tc.want) {
				return
			}
			if got.Error() != want.Error() {
				t.Errorf("the backend refused with %q, the portable layer with %q", got, want)
			}
		})
	}
	if got := snapshot(t, tbl); len(got) > 0 {
		t.Errorf("refused writes left %d entities, first %s", len(got), keyOf(got[0]))
	}
}
