package store

import (
	"context"
	"fmt"
)

// wrap returns the portable table over an engine's table, implementing
// Counter if the engine's table does, checked as the Table methods are:
// callers find the fast path by type assertion and must not find one the
// engine lacks.
func (b *backend) wrap(engine Table) Table {
	t := &table{engine: engine, backend: b}
	if c, ok := engine.(Counter); ok {
		return struct {
			*table
			counting
		}{t, counting{c}}
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
