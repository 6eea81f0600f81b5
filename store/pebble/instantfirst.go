package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/metadatad/metadatad/store"
)

// Instant-first tables (PurgeBatch.InstantFirst): a minute-keyed table
// whose every row key is its capture instant, then "_", then the rest
// (images' index rows in this service's form, <row key>_<camera>), and
// never anything that reads the other way round (the fleet's
// <camera>_<row key>, which only a copy from Azure or a hand-written row
// brings). A purge that knows this deletes each index row by one key
// instead of trying both forms: half the point tombstones of a thinning.
//
// The knowledge is a record per table, written when MinuteKeyed first
// declares the table while it is empty, and deleted in the batch of the
// first write of a row of another form, whoever writes it: the records
// are loaded when the store opens, so a copy run by a process that never
// declares the table clears it too. A table that held rows before its
// first declaration has no record and keeps both forms' tombstones.
var instantFirstPrefix = []byte{sep, 'i', 'n', 's', 't', 'a', 'n', 't', sep}

func instantFirstKey(tableKey string) []byte {
	return append(bytes.Clone(instantFirstPrefix), tableKey...)
}

// instantFirstTables are the tables with a record, by table key; a flag
// set false once a write of another form is staged.
type instantFirstTables = map[string]*atomic.Bool

// loadInstantFirst reads the records when the store opens. Records in a
// damaged table file are dropped, unread (a range deletion reads nothing),
// rather than refusing to start: every table then deletes both forms, as
// one without a record does, and a write of another form this run cannot
// leave a stale record behind for a later run, once the file is restored.
func (d *DB) loadInstantFirst() error {
	tables, err := d.readInstantFirst()
	if pebbledb.IsCorruptionError(err) {
		d.log.Warn("pebble: the index tables' key-form records sit in a damaged table file; dropping them (purges delete both key forms)", "err", err)
		if err := d.db.DeleteRange(instantFirstPrefix, prefixEnd(instantFirstPrefix), pebbledb.Sync); err != nil {
			return engineError("write", err)
		}
		tables, err = instantFirstTables{}, nil
	}
	if err != nil {
		return engineError("iterate", err)
	}
	d.instantFirst.Store(&tables)
	return nil
}

func (d *DB) readInstantFirst() (instantFirstTables, error) {
	iter, err := d.db.NewIter(&pebbledb.IterOptions{LowerBound: instantFirstPrefix, UpperBound: prefixEnd(instantFirstPrefix)})
	if err != nil {
		return nil, err
	}
	tables := instantFirstTables{}
	for valid := iter.First(); valid; valid = iter.Next() {
		f := &atomic.Bool{}
		f.Store(true)
		tables[string(iter.Key()[len(instantFirstPrefix):])] = f
	}
	return tables, errors.Join(iter.Error(), iter.Close())
}

// declareInstantFirst writes own's record if own is empty and has none,
// with every write held off so that none lands between the look and the
// record. The caller holds tallyMu.
func (d *DB) declareInstantFirst(ctx context.Context, own *table) error {
	if m := d.instantFirst.Load(); m != nil && (*m)[own.key] != nil {
		return nil
	}
	// A table with rows stays unknown: no need to hold off writes to see.
	if empty, err := d.emptyUndamaged(ctx, own); err != nil || !empty {
		return err
	}
	return d.exclusively(time.Time{}, func() error {
		empty, err := d.emptyUndamaged(ctx, own)
		if err != nil || !empty {
			return err
		}
		if err := d.db.Set(instantFirstKey(own.key), nil, pebbledb.Sync); err != nil {
			return fmt.Errorf("pebble: instant-first record: %w", err)
		}
		next := instantFirstTables{}
		if m := d.instantFirst.Load(); m != nil {
			next = maps.Clone(*m)
		}
		f := &atomic.Bool{}
		f.Store(true)
		next[own.key] = f
		d.instantFirst.Store(&next)
		return nil
	})
}

// emptyUndamaged reports whether own holds no row; a table in a damaged
// file reads as not empty, so that it stays unknown (both forms).
func (d *DB) emptyUndamaged(ctx context.Context, own *table) (bool, error) {
	empty, err := d.isEmpty(ctx, tablePrefix(own.key))
	if errors.Is(err, store.ErrCorrupt) {
		return false, nil
	}
	return empty, err
}

// stageInstantFirst deletes, in batch, the record of the table of a row
// written with the given keys when they are not of the instant-first
// form. The flag drops before the commit: a purge that reads it meanwhile
// tries both forms, which is what it did without the record.
func (d *DB) stageInstantFirst(batch *pebbledb.Batch, tableKey, partitionKey, rowKey string) error {
	m := d.instantFirst.Load()
	if m == nil {
		return nil
	}
	f := (*m)[tableKey]
	if f == nil || !f.Load() || isInstantFirst(partitionKey, rowKey) {
		return nil
	}
	f.Store(false)
	if err := batch.Delete(instantFirstKey(tableKey), nil); err != nil {
		return fmt.Errorf("pebble: instant-first record: %w", err)
	}
	return nil
}

// InstantFirst reports whether every row of the table has an
// instant-first key (store.PurgeBatch). Reads are of the committed store,
// under the batch's exclusion.
func (b *purgeBatch) InstantFirst(table string) bool {
	own, err := b.d.ownTable(table)
	if err != nil {
		return false
	}
	m := b.d.instantFirst.Load()
	if m == nil {
		return false
	}
	f := (*m)[own.key]
	return f != nil && f.Load()
}

// The lengths of a row key that is an instant and of a minute's partition.
var (
	instantDigits = len(store.InvertedTicksRowKey(store.TimeFromTicks(0)))
	minuteDigits  = len(store.MinutePartitionKey(store.TimeFromTicks(0)))
)

// isInstantFirst says whether a row key is a capture instant of its
// partition's minute, "_" and a rest that does not end in another such
// instant (which would read as the fleet's <camera>_<row key>).
func isInstantFirst(partitionKey, rowKey string) bool {
	if len(partitionKey) < minuteDigits || len(rowKey) < instantDigits+2 || rowKey[instantDigits] != '_' {
		return false
	}
	inMinute := func(k string) bool {
		if len(k) != instantDigits {
			return false // unparsed: a create's index row pays this check
		}
		at, err := store.TimeFromInvertedTicksRowKey(k)
		return err == nil && store.MinutePartitionKey(at) == partitionKey[:minuteDigits]
	}
	return inMinute(rowKey[:instantDigits]) && !inMinute(rowKey[strings.LastIndexByte(rowKey, '_')+1:])
}
