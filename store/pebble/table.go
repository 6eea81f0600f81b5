package pebble

import (
	"bytes"
	"context"
	"errors"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/metadatad/metadatad/store"
)

// ctxCheckEvery is how many rows a read visits between context checks.
const ctxCheckEvery = 256

// table is the engine's side of one table of a DB: store.Table and
// store.Counter on input that the portable layer has checked (see store.Driver). Callers get it only
// wrapped in that layer.
type table struct {
	db   *DB
	name string
	// key is the table's key prefix: the name in lower case, since table
	// names are case-insensitive.
	key string
}

// Name is the table's name.
func (t *table) Name() string { return t.name }

// Insert adds e; store.ErrAlreadyExists if its key is taken.
func (t *table) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	return t.writeOne(ctx, store.Op{Kind: store.OpInsert, Entity: e})
}

// Upsert adds e or writes over the stored entity per mode.
func (t *table) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	return t.writeOne(ctx, store.Op{Kind: store.OpUpsert, Entity: e, Mode: mode})
}

// Update writes over the stored entity per mode, if its ETag matches ifMatch.
func (t *table) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	return t.writeOne(ctx, store.Op{Kind: store.OpUpdate, Entity: e, Mode: mode, IfMatch: ifMatch})
}

// Delete removes one entity, if its ETag matches ifMatch.
func (t *table) Delete(ctx context.Context, partitionKey, rowKey, ifMatch string) error {
	_, err := t.writeOne(ctx, store.Op{Kind: store.OpDelete, IfMatch: ifMatch,
		Entity: store.Entity{PartitionKey: partitionKey, RowKey: rowKey}})
	return err
}

// writeOne runs a single operation through the batch path and reports its
// error unwrapped, as a single call should.
func (t *table) writeOne(ctx context.Context, op store.Op) (store.Entity, error) {
	results, err := t.db.apply(ctx, []write{{table: t.key, op: op}})
	if err != nil {
		return store.Entity{}, unwrapBatch(err)
	}
	return results[0], nil
}

func unwrapBatch(err error) error {
	var be *store.BatchError
	if errors.As(err, &be) {
		return be.Err
	}
	return err
}

// Batch applies operations on one partition atomically.
func (t *table) Batch(ctx context.Context, ops []store.Op) error {
	writes := make([]write, len(ops))
	for i, op := range ops {
		writes[i] = write{table: t.key, op: op}
	}
	_, err := t.db.apply(ctx, writes)
	return err
}

// Get reads one entity.
func (t *table) Get(ctx context.Context, partitionKey, rowKey string) (store.Entity, error) {
	if err := ctx.Err(); err != nil {
		return store.Entity{}, err
	}
	e, found, err := t.db.get(encodeKey(t.key, partitionKey, rowKey), partitionKey, rowKey)
	if err != nil {
		return store.Entity{}, err
	}
	if !found {
		return store.Entity{}, store.ErrNotFound
	}
	return e, nil
}

// Query reads one partition in row-key order.
func (t *table) Query(ctx context.Context, q store.Query) (store.Page, error) {
	lower, upper := t.rowBounds(q.PartitionKey, q.Rows)
	if q.Resume != nil {
		lower = maxKey(lower, encodeKey(t.key, q.PartitionKey, q.Resume.RowKey))
	}
	return t.page(ctx, lower, upper, q.Where, nil, q.Limit)
}

// Scan reads a range of partitions in key order.
func (t *table) Scan(ctx context.Context, s store.Scan) (store.Page, error) {
	lower, upper := t.scanBounds(s)
	return t.page(ctx, lower, upper, s.Where, s.Select, s.Limit)
}

// scanBounds are the keys a scan reads, [lower, upper).
func (t *table) scanBounds(s store.Scan) (lower, upper []byte) {
	prefix := tablePrefix(t.key)
	lower = append(prefix, s.Partitions.From...)
	upper = prefixEnd(prefix)
	if s.Partitions.To != "" {
		// Any key of partition To or above sorts at or after prefix+To.
		upper = append(tablePrefix(t.key), s.Partitions.To...)
	}
	if s.Resume != nil {
		lower = maxKey(lower, encodeKey(t.key, s.Resume.PartitionKey, s.Resume.RowKey))
	}
	return lower, upper
}

// page reads up to limit matching entities in [lower, upper), with the
// selected properties (nil: all). The cursor it returns names the first key
// it did not look at.
func (t *table) page(ctx context.Context, lower, upper []byte, where []store.Equal, sel []string, limit int) (store.Page, error) {
	var page store.Page
	if bytes.Compare(lower, upper) >= 0 {
		return page, ctx.Err()
	}
	iter, err := t.db.db.NewIterWithContext(ctx, &pebbledb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return page, engineError("iterate", err)
	}
	defer iter.Close()
	visited := 0
	keys := keyReader{table: t.key}
	for valid := iter.First(); valid; valid = iter.Next() {
		pk, rk, err := keys.decode(iter.Key())
		if err != nil {
			return store.Page{}, err
		}
		if len(page.Entities) == limit {
			page.Next = &store.Cursor{PartitionKey: pk, RowKey: rk}
			break
		}
		if visited++; visited%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return store.Page{}, err
			}
		}
		value, err := iter.ValueAndErr()
		if err != nil {
			return store.Page{}, engineError("read", err)
		}
		e, err := decodeSelected(pk, rk, value, sel)
		if err != nil {
			return store.Page{}, err
		}
		if store.Matches(e.Properties, where) {
			page.Entities = append(page.Entities, e)
		}
	}
	if err := iter.Error(); err != nil {
		return store.Page{}, engineError("iterate", err)
	}
	return page, ctx.Err()
}

// Walk reads a page of a scan as Scan does, handing each row's properties
// to row as they decode (store.Walker): no map, no interface per value.
func (t *table) Walk(ctx context.Context, s store.Scan, row store.RowFunc) (*store.Cursor, error) {
	lower, upper := t.scanBounds(s)
	if bytes.Compare(lower, upper) >= 0 {
		return nil, ctx.Err()
	}
	iter, err := t.db.db.NewIterWithContext(ctx, &pebbledb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, engineError("iterate", err)
	}
	defer iter.Close()
	var w valueWalk
	props := w.each // one closure for every row
	keys := keyReader{table: t.key}
	read := 0
	for valid := iter.First(); valid; valid = iter.Next() {
		pk, rk, err := keys.decode(iter.Key())
		if err != nil {
			return nil, err
		}
		if read == s.Limit {
			return &store.Cursor{PartitionKey: pk, RowKey: rk}, nil
		}
		if read++; read%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if w.value, err = iter.ValueAndErr(); err != nil {
			return nil, engineError("read", err)
		}
		w.err = nil
		if err := row(pk, rk, props); err != nil {
			return nil, err
		}
		if w.err != nil {
			return nil, w.err
		}
	}
	if err := iter.Error(); err != nil {
		return nil, engineError("iterate", err)
	}
	return nil, ctx.Err()
}

// valueWalk is the property sequence of the row a Walk is at.
type valueWalk struct {
	value []byte
	err   error
}

func (w *valueWalk) each(yield func(string, store.Value) bool) {
	if err := walkValue(w.value, yield); err != nil && w.err == nil {
		w.err = err
	}
}

// CountRows counts a partition's rows in a row-key range by walking their
// keys, without decoding a value.
func (t *table) CountRows(ctx context.Context, partitionKey string, rows store.Range) (int64, error) {
	lower, upper := t.rowBounds(partitionKey, rows)
	if bytes.Compare(lower, upper) >= 0 {
		return 0, ctx.Err()
	}
	return t.countKeys(ctx, lower, upper)
}

// countKeys counts the keys in [lower, upper).
func (t *table) countKeys(ctx context.Context, lower, upper []byte) (int64, error) {
	iter, err := t.db.db.NewIterWithContext(ctx, &pebbledb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, engineError("iterate", err)
	}
	defer iter.Close()
	var n int64
	for valid := iter.First(); valid; valid = iter.Next() {
		if n++; n%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
	}
	if err := iter.Error(); err != nil {
		return 0, engineError("iterate", err)
	}
	return n, ctx.Err()
}

// rowBounds are the keys [lower, upper) of a partition's row-key range.
func (t *table) rowBounds(partitionKey string, rows store.Range) (lower, upper []byte) {
	lower = encodeKey(t.key, partitionKey, rows.From)
	if rows.To == "" {
		return lower, prefixEnd(partitionPrefix(t.key, partitionKey))
	}
	return lower, encodeKey(t.key, partitionKey, rows.To)
}

// prefixEnd is the first key after every key with the given prefix, whose
// last byte is the 0x00 separator.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	end[len(end)-1] = sep + 1
	return end
}

func maxKey(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}
