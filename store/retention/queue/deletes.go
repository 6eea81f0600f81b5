package queue

import (
	"context"

	"github.com/metadatad/metadatad/store"
)

// deleteQueried deletes every row of a partition's range, a batch at a time,
// and returns how many rows it found and deleted. A row already gone fails
// a whole batch on Azure; it is dropped and the rest retried, so a second
// run over the same rows succeeds. It is counted: it was there when
// queried, so it is gone by this delete's earlier attempt, whose answer
// was lost, or by another deleter of the same expired row.
func deleteQueried(ctx context.Context, t store.Table, partitionKey string, rows store.Range) (int64, error) {
	q := store.Query{PartitionKey: partitionKey, Rows: rows, Limit: store.MaxBatchOps}
	var n int64
	for {
		page, err := t.Query(ctx, q)
		if err != nil {
			return n, err
		}
		keys := make([]store.Key, len(page.Entities))
		for i, e := range page.Entities {
			keys[i] = store.Key{PartitionKey: e.PartitionKey, RowKey: e.RowKey}
		}
		if err := deleteBatch(ctx, t, keys); err != nil {
			return n, err
		}
		n += int64(len(keys))
		if page.Next == nil {
			return n, nil
		}
		if len(page.Entities) == 0 {
			q.Resume = page.Next
		}
	}
}

// deleteBatch deletes up to MaxBatchOps rows of one partition, ignoring rows
// already gone.
func deleteBatch(ctx context.Context, t store.Table, keys []store.Key) error {
	ops := make([]store.Op, len(keys))
	for i, k := range keys {
		ops[i] = store.Op{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: k.PartitionKey, RowKey: k.RowKey}}
	}
	return store.BatchDeletes(ctx, t, ops, nil)
}
