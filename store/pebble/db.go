package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
)

// Options configures Open. The zero value of every field but Dir is usable.
type Options struct {
	// Dir is the database directory, created if missing.
	Dir string
	// FS is the filesystem; nil means the operating system's. Tests pass
	// vfs.NewMem or vfs.NewCrashableMem to run the real engine in memory.
	FS vfs.FS
	// Now is the clock for entity timestamps and for how long flushes have
	// failed (see failstop.go); nil means time.Now.
	Now func() time.Time
	// Logger receives the engine's messages; nil means slog.Default. A
	// fatal error of the engine is logged here and then ends the process
	// (see failstop.go).
	Logger *slog.Logger
	// AdmitWrite is asked before every commit that adds data (deletes never
	// ask: they are how space comes back); an error refuses the commit with
	// store.ErrInsufficientStorage. Nil admits every write. The daemon
	// passes a diskspace.Guard's Admit.
	AdmitWrite func(ctx context.Context) error
	// CacheSize is the block cache's size in bytes; 0 means DefaultCacheSize.
	CacheSize int64
	// MemTableSize is one memtable's size in bytes; 0 means
	// DefaultMemTableSize. Up to 4 are held while flushes catch up, and
	// each write-ahead log file reserves 1.1 times it on disk.
	MemTableSize uint64

	// noCompactions turns the engine's compactions off, for tests that
	// need its files to stay as flushed.
	noCompactions bool
	// exit ends the process after a fatal engine error; nil means os.Exit.
	// Tests record the call instead.
	exit func(code int)
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.exit == nil {
		o.exit = os.Exit
	}
	return o
}

// DB is an open embedded store. It implements store.Backend and
// store.Transactor through the portable layer (store.NewBackend), which
// checks every call before the engine sees it.
type DB struct {
	// tables is the portable layer over this DB's driver.
	tables portableBackend
	db     *pebbledb.DB
	now    func() time.Time
	admit  func(ctx context.Context) error
	locks  *locks
	// etags counts writes; seeded from the clock so ETags stay unique across restarts.
	etags atomic.Uint64
	// rangeDels counts the range tombstones written since the last flush
	// this DB asked for (see flushRangeDels).
	rangeDels atomic.Int64
	log       *slog.Logger
	// marks detects a MANIFEST cut short (see flushMarks).
	marks *flushMarks
	// flushes follows the engine's flushes (see failstop.go).
	flushes *flushWatch
}

// Open opens or creates the database in opts.Dir. A directory whose files
// are damaged is an error wrapping store.ErrCorrupt that names it.
func Open(opts Options) (*DB, error) {
	opts = opts.withDefaults()
	if opts.Dir == "" {
		return nil, errors.New("pebble: Options.Dir is empty")
	}
	marks := newFlushMarks(opts)
	flushes := newFlushWatch(opts, newFailStop(opts))
	db, err := openEngine(opts, marks, flushes)
	if err == nil {
		if err = marks.check(db); err != nil {
			err = errors.Join(err, db.Close())
		}
	}
	// A file that the engine's list names and the directory lacks is damage
	// too: the directory itself exists, or Open would have created it.
	if errors.Is(err, errOpenPanicked) || errors.Is(err, errDamaged) || errors.Is(err, os.ErrNotExist) || pebbledb.IsCorruptionError(err) {
		return nil, fmt.Errorf("%w: the data directory %s is damaged: %v; restore it from a backup, or move it aside to start empty", store.ErrCorrupt, opts.Dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", opts.Dir, err)
	}
	go marks.run()
	d := &DB{db: db, now: opts.Now, admit: opts.AdmitWrite, locks: newLocks(), log: opts.Logger, marks: marks,
		flushes: flushes}
	d.etags.Store(uint64(time.Now().UnixNano()))
	d.tables = store.NewBackend(store.Driver{OpenTable: d.openTable, Transact: d.transact}).(portableBackend)
	return d, nil
}

// portableBackend is what store.NewBackend returns over a driver that
// transacts.
type portableBackend interface {
	store.Backend
	store.Transactor
}

// errOpenPanicked reports a panic of the engine while it read the files of
// an existing directory.
var errOpenPanicked = errors.New("the engine panicked reading it")

// openEngine opens Pebble, turning a panic on files it cannot make sense of
// into a corruption error: the operator gets one message, not a stack.
func openEngine(opts Options, marks *flushMarks, flushes *flushWatch) (db *pebbledb.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("%w: %v", errOpenPanicked, p)
		}
	}()
	o := engineOptions(opts, flushes)
	listener := pebbledb.TeeEventListener(*o.EventListener, pebbledb.EventListener{FlushEnd: marks.flushed})
	o.EventListener = &listener
	o.DisableAutomaticCompactions = opts.noCompactions
	return pebbledb.Open(opts.Dir, o)
}

// corruptionLog logs each damaged file once. Pebble reports damage as it
// meets it, on every read of the file; the reads themselves fail with
// store.ErrCorrupt and the rest of the data goes on being served.
func corruptionLog(log *slog.Logger) func(pebbledb.DataCorruptionInfo) {
	var logged sync.Map
	return func(info pebbledb.DataCorruptionInfo) {
		if _, seen := logged.LoadOrStore(info.Path, true); !seen {
			log.Error("damaged data file: reads of its keys fail with DATA_LOSS; restore it from a backup",
				"file", info.Path, "err", info.Details)
		}
	}
}

// engineError wraps an engine error, as store.ErrCorrupt when it reports
// damaged data.
func engineError(op string, err error) error {
	if pebbledb.IsCorruptionError(err) {
		return fmt.Errorf("%w: pebble: %s: %v", store.ErrCorrupt, op, err)
	}
	return fmt.Errorf("pebble: %s: %w", op, err)
}

// Close flushes nothing it has not already synced and releases the database.
func (d *DB) Close() error {
	d.marks.close()
	return d.db.Close()
}

// Metrics is the engine's own account of its health: read amplification,
// compaction debt, cache hits, disk usage and the rest.
func (d *DB) Metrics() *pebbledb.Metrics { return d.db.Metrics() }

// Table returns a handle on the named table. Tables need no creation: a
// table is the set of keys under its name.
func (d *DB) Table(ctx context.Context, name string) (store.Table, error) {
	return d.tables.Table(ctx, name)
}

// Transact applies operations on several tables of this DB atomically.
func (d *DB) Transact(ctx context.Context, ops []store.TableOp) error {
	return d.tables.Transact(ctx, ops)
}

// openTable is the driver's side of Table; the name is valid and its lower
// case keys the table, since table names are case-insensitive.
func (d *DB) openTable(_ context.Context, name string) (store.Table, error) {
	return &table{db: d, name: name, key: strings.ToLower(name)}, nil
}

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
	partitions := make([][]byte, len(writes))
	for i, w := range writes {
		keys[i] = encodeKey(w.table, w.op.Entity.PartitionKey, w.op.Entity.RowKey)
		partitions[i] = partitionPrefix(w.table, w.op.Entity.PartitionKey)
	}
	defer d.locks.lockKeys(partitions, keys)()

	batch := d.db.NewBatch()
	defer batch.Close()
	now := d.now().UTC()
	results := make([]store.Entity, len(writes))
	for i, w := range writes {
		var stored store.Entity
		var found bool
		var err error
		// A replacing upsert writes the same whatever is stored: skip the read,
		// which every create's index row would otherwise pay.
		if w.op.Kind != store.OpUpsert || w.op.Mode != store.Replace {
			stored, found, err = d.get(keys[i], w.op.Entity.PartitionKey, w.op.Entity.RowKey)
			if err != nil {
				return nil, &store.BatchError{Index: i, Err: err}
			}
		}
		next, err := d.resolve(w.op, stored, found, now)
		if err != nil {
			return nil, &store.BatchError{Index: i, Err: err}
		}
		if w.op.Kind == store.OpDelete {
			err = batch.Delete(keys[i], nil)
		} else {
			var value []byte
			if value, err = encodeValue(next); err == nil {
				err = batch.Set(keys[i], value, nil)
			}
		}
		if err != nil {
			return nil, &store.BatchError{Index: i, Err: err}
		}
		results[i] = next
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := batch.Commit(pebbledb.Sync); err != nil {
		return nil, fmt.Errorf("pebble: commit: %w", err)
	}
	return results, nil
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
	next.ETag = `W/"` + strconv.FormatUint(d.etags.Add(1), 16) + `"`
	next.Timestamp = now
	return next, nil
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
