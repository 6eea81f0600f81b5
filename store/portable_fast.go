package store

import (
	"context"
	"fmt"
)

// wrap returns the portable table over an engine's table, implementing the
// optional interfaces the engine's table implements, each checked as the
// Table methods are, and no others: callers find fast paths by type
// assertion and must not find one the engine lacks.
func (b *backend) wrap(engine Table) Table {
	t := &table{engine: engine, backend: b}
	c, isCounter := engine.(Counter)
	k, isKeyDeleter := engine.(KeyDeleter)
	r, isRangeDeleter := engine.(RangeDeleter)
	counter, keys, ranges := counting{c}, keyDeleting{k}, rangeDeleting{r}
	switch {
	case isCounter && isKeyDeleter && isRangeDeleter:
		return struct {
			*table
			counting
			keyDeleting
			rangeDeleting
		}{t, counter, keys, ranges}
	case isCounter && isKeyDeleter:
		return struct {
			*table
			counting
			keyDeleting
		}{t, counter, keys}
	case isCounter && isRangeDeleter:
		return struct {
			*table
			counting
			rangeDeleting
		}{t, counter, ranges}
	case isKeyDeleter && isRangeDeleter:
		return struct {
			*table
			keyDeleting
			rangeDeleting
		}{t, keys, ranges}
	case isCounter:
		return struct {
			*table
			counting
		}{t, counter}
	case isKeyDeleter:
		return struct {
			*table
			keyDeleting
		}{t, keys}
	case isRangeDeleter:
		return struct {
			*table
			rangeDeleting
		}{t, ranges}
	}
	return t
}

type counting struct{ engine Counter }

func (c counting) CountRows(ctx context.Context, partitionKey string, rows Range) (int64, error) {
	if err := ValidateKey(partitionKey); err != nil {
		return 0, fmt.Errorf("partition key: %w", err)
	}
	if err := checkRange("rows", rows); err != nil {
		return 0, err
	}
	return c.engine.CountRows(ctx, partitionKey, rows)
}

type keyDeleting struct{ engine KeyDeleter }

func (k keyDeleting) DeleteKeys(ctx context.Context, deletes []KeyDelete) error {
	for i, d := range deletes {
		if err := ValidateAddress(d.PartitionKey, d.RowKey); err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
	}
	if len(deletes) == 0 {
		return ctx.Err()
	}
	return k.engine.DeleteKeys(ctx, deletes)
}

type rangeDeleting struct{ engine RangeDeleter }

func (r rangeDeleting) DeleteRanges(ctx context.Context, ranges []RowRange) ([]int64, error) {
	for i, rr := range ranges {
		if err := ValidateKey(rr.PartitionKey); err != nil {
			return nil, fmt.Errorf("range %d: partition key: %w", i, err)
		}
		if err := checkRange(fmt.Sprintf("range %d: rows", i), rr.Rows); err != nil {
			return nil, err
		}
	}
	if len(ranges) == 0 {
		return []int64{}, ctx.Err()
	}
	return r.engine.DeleteRanges(ctx, ranges)
}

func (r rangeDeleting) Fence() Fence { return r.engine.Fence() }

func (r rangeDeleting) DeletePartitions(ctx context.Context, partitionKeys []string, fence Fence) error {
	for i, pk := range partitionKeys {
		if err := ValidateKey(pk); err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
	}
	if len(partitionKeys) == 0 {
		return ctx.Err()
	}
	return r.engine.DeletePartitions(ctx, partitionKeys, fence)
}
