package store

import (
	"context"
	"errors"
	"slices"
)

// BatchDeletes runs a batch of deletes (or updates) of one partition, dropping
// and retrying without each whose row is already gone, and, when kept is
// set, each whose row no longer has its IfMatch ETag, after telling kept.
func BatchDeletes(ctx context.Context, t Table, ops []Op, kept func() error) error {
	for len(ops) > 0 {
		err := t.Batch(ctx, ops)
		var be *BatchError
		switch {
		case !errors.As(err, &be):
			return err
		case errors.Is(err, ErrNotFound):
		case errors.Is(err, ErrConflict) && kept != nil:
			if err := kept(); err != nil {
				return err
			}
		default:
			return err
		}
		ops = slices.Delete(ops, be.Index, be.Index+1)
	}
	return nil
}

// CountRows counts the rows of one partition in a row range: by their keys
// alone where the backend can, else by reading them.
func CountRows(ctx context.Context, t Table, partitionKey string, rows Range) (int64, error) {
	if c, ok := t.(Counter); ok {
		return c.CountRows(ctx, partitionKey, rows)
	}
	var n int64
	q := Query{PartitionKey: partitionKey, Rows: rows}
	for {
		page, err := t.Query(ctx, q)
		if err != nil {
			return 0, err
		}
		n += int64(len(page.Entities))
		if page.Next == nil {
			return n, nil
		}
		q.Resume = page.Next
	}
}
