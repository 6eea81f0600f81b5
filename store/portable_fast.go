package store

import (
	"context"
	"fmt"
)

// wrap returns the portable table over an engine's table, implementing
// Counter and Walker where the engine's table does, checked as the Table
// methods are: callers find the fast paths by type assertion and must not
// find one the engine lacks.
func (b *backend) wrap(engine Table) Table {
	t := &table{engine: engine, backend: b}
	c, counts := engine.(Counter)
	w, walks := engine.(Walker)
	switch {
	case counts && walks:
		return struct {
			*table
			counting
			walking
		}{t, counting{c}, walking{w}}
	case counts:
		return struct {
			*table
			counting
		}{t, counting{c}}
	case walks:
		return struct {
			*table
			walking
		}{t, walking{w}}
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

type walking struct{ engine Walker }

func (w walking) Walk(ctx context.Context, s Scan, row RowFunc) (*Cursor, error) {
	if s.Where != nil || s.Select != nil {
		return nil, fmt.Errorf("%w: a walk neither filters nor selects", ErrInvalidQuery)
	}
	limit, _, err := checkScan(s)
	if err != nil {
		return nil, err
	}
	s.Limit = limit
	return w.engine.Walk(ctx, s, row)
}
