package pebble

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/metadatad/metadatad/store"
)

// transact is the driver's side of Transact: the portable layer has
// checked the operations and hands over this DB's own tables.
func (d *DB) transact(ctx context.Context, ops []store.TableOp) error {
	writes := make([]write, len(ops))
	for i, op := range ops {
		writes[i] = write{table: op.Table.(*table).key, op: op.Op}
	}
	_, err := d.apply(ctx, writes)
	return err
}

// write is one operation on one table.
type write struct {
	table string
	op    store.Op
}

// apply checks every operation's condition against the stored rows and
// commits them in one synced batch, all or none. The lock stripes of every
// key are held from the first read to the commit, so no other write can slip
// between a condition and its write.
func (d *DB) apply(ctx context.Context, writes []write) ([]store.Entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := d.admitWrite(ctx, writes); err != nil {
		return nil, err
	}
	keys := make([][]byte, len(writes))
	for i, w := range writes {
		keys[i] = encodeKey(w.table, w.op.Entity.PartitionKey, w.op.Entity.RowKey)
	}
	defer d.enter(writes)()
	d.noteLate(writes)
	defer d.locks.lockKeys(keys)()

	batch := d.db.NewBatch()
	defer batch.Close()
	now := d.now().UTC()
	results := make([]store.Entity, len(writes))
	tallies := d.tallies.Load()
	// marked are the partitions of the writes that keep low marks.
	marked := make([][]byte, len(writes))
	for i, w := range writes {
		next, mark, err := d.stageWrite(batch, w, keys[i], tallies, now)
		if err != nil {
			return nil, &store.BatchError{Index: i, Err: err}
		}
		results[i], marked[i] = next, mark
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := batch.Commit(pebbledb.Sync); err != nil {
		return nil, fmt.Errorf("pebble: commit: %w", err)
	}
	// Before the stripes are released (see lowmark.go).
	for i, w := range writes {
		if marked[i] != nil && w.op.Kind != store.OpDelete {
			d.lower(marked[i], w.op.Entity.RowKey)
		}
	}
	return results, nil
}

// stageWrite adds one write, under its key's stripe, to batch: the row resolved
// against what is stored (read only when it must be), and its tally's
// change. mark is the partition whose low mark the write lowers once
// committed (nil: none).
func (d *DB) stageWrite(batch *pebbledb.Batch, w write, key []byte, tallies *map[string]*tallyState, now time.Time) (next store.Entity, mark []byte, err error) {
	var tally *tallyState
	if tallies != nil {
		if tally = (*tallies)[w.table]; tally != nil {
			mark = partitionPrefix(w.table, w.op.Entity.PartitionKey)
			if !tally.counts(key) {
				tally = nil
			}
		}
	}
	// A replacing upsert writes the same whatever is stored: skip the read,
	// which every create's index row would otherwise pay, unless the tally
	// needs to know whether it adds a row. An insert below its partition's
	// low mark skips it too (see lowmark.go).
	read := w.op.Kind != store.OpUpsert || w.op.Mode != store.Replace || tally != nil
	if read && w.op.Kind == store.OpInsert && mark != nil {
		below, err := d.below(mark, w.op.Entity.RowKey)
		if err != nil {
			return store.Entity{}, nil, err
		}
		if below {
			read = false
			d.readsSkipped.Add(1)
		}
	}
	var stored store.Entity
	var found bool
	if read {
		if stored, found, err = d.get(key, w.op.Entity.PartitionKey, w.op.Entity.RowKey); err != nil {
			return store.Entity{}, nil, err
		}
	}
	if next, err = d.resolve(w.op, stored, found, now); err != nil {
		return store.Entity{}, nil, err
	}
	if w.op.Kind == store.OpDelete {
		err = batch.Delete(key, nil)
	} else if err = d.stageInstantFirst(batch, w.table, w.op.Entity.PartitionKey, w.op.Entity.RowKey); err == nil {
		var value []byte
		if value, err = encodeValue(next); err == nil {
			err = batch.Set(key, value, nil)
		}
	}
	if err != nil {
		return store.Entity{}, nil, err
	}
	// resolve refused an insert of a taken key and a delete of a missing
	// one, so only these change whether the row exists.
	added := !found && (w.op.Kind == store.OpInsert || w.op.Kind == store.OpUpsert)
	if tally != nil && (added || w.op.Kind == store.OpDelete) {
		if key, record, ok := rowTally(w.table, w.op.Entity.PartitionKey, w.op.Entity.RowKey, !added); ok {
			if err := batch.Merge(key, record, nil); err != nil {
				return store.Entity{}, nil, err
			}
		}
	}
	return next, mark, nil
}

// admitWrite asks AdmitWrite about writes that add data.
func (d *DB) admitWrite(ctx context.Context, writes []write) error {
	if d.admit == nil || !slices.ContainsFunc(writes, func(w write) bool { return w.op.Kind != store.OpDelete }) {
		return nil
	}
	if err := d.admit(ctx); err != nil {
		return fmt.Errorf("%w: %w", store.ErrInsufficientStorage, err)
	}
	return nil
}

// resolve checks op's condition against the stored entity and returns what
// the row becomes.
func (d *DB) resolve(op store.Op, stored store.Entity, found bool, now time.Time) (store.Entity, error) {
	switch op.Kind {
	case store.OpInsert:
		if found {
			return store.Entity{}, store.ErrAlreadyExists
		}
	case store.OpUpdate, store.OpDelete:
		if !found {
			return store.Entity{}, store.ErrNotFound
		}
		if op.IfMatch != "" && op.IfMatch != "*" && op.IfMatch != stored.ETag {
			return store.Entity{}, store.ErrConflict
		}
	}
	next := op.Entity
	if op.Kind == store.OpDelete {
		return next, nil
	}
	if found && op.Mode == store.Merge && op.Kind != store.OpInsert {
		merged := make(store.Properties, len(stored.Properties)+len(op.Entity.Properties))
		for k, v := range stored.Properties {
			merged[k] = v
		}
		for k, v := range op.Entity.Properties {
			merged[k] = v
		}
		next.Properties = merged
	}
	return d.stamp(next, now), nil
}

// stamp gives e a new ETag and now as its Timestamp, as every write does.
func (d *DB) stamp(e store.Entity, now time.Time) store.Entity {
	e.ETag = `W/"` + strconv.FormatUint(d.etags.Add(1), 16) + `"`
	e.Timestamp = now
	return e
}

// get reads one row; found is false when it is missing.
func (d *DB) get(key []byte, partitionKey, rowKey string) (e store.Entity, found bool, err error) {
	value, closer, err := d.db.Get(key)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return store.Entity{}, false, nil
	}
	if err != nil {
		return store.Entity{}, false, engineError("get", err)
	}
	defer closer.Close()
	e, err = decodeValue(partitionKey, rowKey, value)
	return e, err == nil, err
}
