package observed

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/metadatad/metadatad/store"
)

// Options configures Backend.
type Options struct {
	// Name is the backend label of every series and span, e.g. "embedded" or "azure". Required.
	Name string
	// Metrics receives the measurements; nil leaves them out.
	Metrics *Metrics
	// Tracer makes a span of every operation called within a trace, a
	// child of the caller's span; nil leaves spans out.
	Tracer trace.Tracer
}

// Backend returns b with every table it opens instrumented. The result
// implements store.Transactor and store.Purger when b does, and its tables
// implement store.Counter and store.Walker when b's do, and no other:
// callers choose fast paths by type assertion.
func Backend(b store.Backend, opts Options) store.Backend {
	base := &backend{inner: b, opts: opts}
	t, isTransactor := b.(store.Transactor)
	p, isPurger := b.(store.Purger)
	switch {
	case isTransactor && isPurger:
		return struct {
			*transactor
			purging
		}{&transactor{backend: base, inner: t}, purging{base, p}}
	case isTransactor:
		return &transactor{backend: base, inner: t}
	case isPurger:
		return struct {
			*backend
			purging
		}{base, purging{base, p}}
	}
	return base
}

// purging forwards store.Purger, and Exclusive's batch as it is: a purge
// names its tables, so there is nothing to unwrap.
type purging struct {
	b     *backend
	inner store.Purger
}

func (p purging) Tally(ctx context.Context, table string) error {
	return p.inner.Tally(ctx, table)
}

func (p purging) MinuteKeyed(ctx context.Context, table string) error {
	return p.inner.MinuteKeyed(ctx, table)
}

func (p purging) AwaitTally(ctx context.Context, table string) error {
	return p.inner.AwaitTally(ctx, table)
}

func (p purging) Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error {
	return p.b.opts.call(ctx, "tallies", table, func(ctx context.Context) error {
		return p.inner.Tallies(ctx, table, partitions, through, visit)
	})
}

func (p purging) TalliedPartitions(ctx context.Context, table string, through time.Time, visit func(string, int) error) error {
	return p.b.opts.call(ctx, "tallied_partitions", table, func(ctx context.Context) error {
		return p.inner.TalliedPartitions(ctx, table, through, visit)
	})
}

func (p purging) WatchLate(table string, before time.Time) (store.LateWrites, func(), error) {
	return p.inner.WatchLate(table, before)
}

// Exclusive is recorded as the operation "purge", the stage's reads and
// writes within it.
func (p purging) Exclusive(ctx context.Context, through time.Time, stage func(ctx context.Context, b store.PurgeBatch) error) error {
	return p.b.opts.call(ctx, "purge", "", func(ctx context.Context) error {
		return p.inner.Exclusive(ctx, through, stage)
	})
}

type backend struct {
	inner store.Backend
	opts  Options
}

func (b *backend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.inner.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return withFastPaths(&table{inner: t, opts: b.opts}), nil
}

// call runs one operation on the table named table (empty for a
// transaction over several) and records it.
func (o Options) call(ctx context.Context, operation, table string, f func(context.Context) error) error {
	var span trace.Span
	// Only within a trace: background polls (queue receives, health
	// checks) would otherwise make a root span each, several a second.
	if o.Tracer != nil && trace.SpanContextFromContext(ctx).IsValid() {
		attrs := []attribute.KeyValue{attribute.String("db.system.name", o.Name), attribute.String("db.operation.name", operation)}
		if table != "" {
			attrs = append(attrs, attribute.String("db.collection.name", table))
		}
		ctx, span = o.Tracer.Start(ctx, "store."+operation, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	}
	start := time.Now()
	err := f(ctx)
	if o.Metrics != nil {
		o.Metrics.observe(o.Name, operation, start, err)
	}
	if span != nil {
		if err != nil {
			kind := errorKind(err)
			span.SetAttributes(attribute.String("error.type", kind))
			// Contract answers (not found, conflict, ...) are outcomes, not faults.
			if kind == "failure" {
				span.SetStatus(codes.Error, err.Error())
			}
		}
		span.End()
	}
	return err
}

// transactor is a backend whose inner backend commits across tables.
type transactor struct {
	*backend
	inner store.Transactor
}

// Transact hands the inner backend its own tables: backends recognise
// their tables by type.
func (b *transactor) Transact(ctx context.Context, ops []store.TableOp) error {
	unwrapped := make([]store.TableOp, len(ops))
	for i, op := range ops {
		unwrapped[i] = store.TableOp{Table: Unwrap(op.Table), Op: op.Op}
	}
	return b.opts.call(ctx, "transact", "", func(ctx context.Context) error { return b.inner.Transact(ctx, unwrapped) })
}

// Unwrap returns the table an instrumented table wraps, or t itself.
func Unwrap(t store.Table) store.Table {
	if w, ok := t.(interface{ instrumented() *table }); ok {
		return w.instrumented().inner
	}
	return t
}

type table struct {
	inner store.Table
	opts  Options
}

func (t *table) instrumented() *table { return t }

func (t *table) Name() string { return t.inner.Name() }

func (t *table) Insert(ctx context.Context, e store.Entity) (out store.Entity, err error) {
	err = t.opts.call(ctx, "insert", t.inner.Name(), func(ctx context.Context) error { out, err = t.inner.Insert(ctx, e); return err })
	return out, err
}

func (t *table) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (out store.Entity, err error) {
	err = t.opts.call(ctx, "upsert", t.inner.Name(), func(ctx context.Context) error { out, err = t.inner.Upsert(ctx, e, mode); return err })
	return out, err
}

func (t *table) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (out store.Entity, err error) {
	err = t.opts.call(ctx, "update", t.inner.Name(), func(ctx context.Context) error {
		out, err = t.inner.Update(ctx, e, mode, ifMatch)
		return err
	})
	return out, err
}

func (t *table) Get(ctx context.Context, partitionKey, rowKey string) (out store.Entity, err error) {
	err = t.opts.call(ctx, "get", t.inner.Name(), func(ctx context.Context) error { out, err = t.inner.Get(ctx, partitionKey, rowKey); return err })
	return out, err
}

func (t *table) Delete(ctx context.Context, partitionKey, rowKey, ifMatch string) error {
	return t.opts.call(ctx, "delete", t.inner.Name(), func(ctx context.Context) error { return t.inner.Delete(ctx, partitionKey, rowKey, ifMatch) })
}

func (t *table) Query(ctx context.Context, q store.Query) (out store.Page, err error) {
	err = t.opts.call(ctx, "query", t.inner.Name(), func(ctx context.Context) error { out, err = t.inner.Query(ctx, q); return err })
	return out, err
}

func (t *table) Scan(ctx context.Context, s store.Scan) (out store.Page, err error) {
	err = t.opts.call(ctx, "scan", t.inner.Name(), func(ctx context.Context) error { out, err = t.inner.Scan(ctx, s); return err })
	return out, err
}

func (t *table) Batch(ctx context.Context, ops []store.Op) error {
	return t.opts.call(ctx, "batch", t.inner.Name(), func(ctx context.Context) error { return t.inner.Batch(ctx, ops) })
}

// withFastPaths returns t implementing store.Counter and store.Walker
// where its inner table does, instrumented too.
func withFastPaths(t *table) store.Table {
	c, counts := t.inner.(store.Counter)
	w, walks := t.inner.(store.Walker)
	switch {
	case counts && walks:
		return struct {
			*table
			counting
			walking
		}{t, counting{t, c}, walking{t, w}}
	case counts:
		return struct {
			*table
			counting
		}{t, counting{t, c}}
	case walks:
		return struct {
			*table
			walking
		}{t, walking{t, w}}
	}
	return t
}

type walking struct {
	t     *table
	inner store.Walker
}

func (w walking) Walk(ctx context.Context, s store.Scan, row store.RowFunc) (next *store.Cursor, err error) {
	err = w.t.opts.call(ctx, "walk", w.t.inner.Name(), func(ctx context.Context) error {
		next, err = w.inner.Walk(ctx, s, row)
		return err
	})
	return next, err
}

type counting struct {
	t     *table
	inner store.Counter
}

func (c counting) CountRows(ctx context.Context, partitionKey string, rows store.Range) (n int64, err error) {
	err = c.t.opts.call(ctx, "count_rows", c.t.inner.Name(), func(ctx context.Context) error {
		n, err = c.inner.CountRows(ctx, partitionKey, rows)
		return err
	})
	return n, err
}
