package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
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
	// Dir is the database directory, created if missing. A new store is
	// made only in a missing or empty directory; the write-ahead log goes
	// in its subdirectory wal.
	Dir string
	// FS is the filesystem; nil means the operating system's. Tests pass
	// vfs.NewMem or vfs.NewCrashableMem to run the real engine in memory.
	FS vfs.FS
	// Now is the clock for entity timestamps and for how long flushes or
	// compactions have failed (see failstop.go); nil means time.Now.
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
	// StallLimit is how long writes may stay stalled while the engine's
	// compactions fail, with none succeeding, before the process stops (a
	// disk full with the free-space guard off; see DefaultStallLimit);
	// 0 means DefaultStallLimit.
	StallLimit time.Duration
	// AllowUnfinished is the command ("copy") whose unfinished marker
	// (UnfinishedName) Open accepts, so that command can finish the
	// directory; empty, Open refuses any marker with ErrUnfinished.
	AllowUnfinished string

	// noCompactions turns the engine's compactions off, for tests that
	// need its files to stay as flushed.
	noCompactions bool
	// logBesideTables opens as builds before the log's own directory did:
	// the log beside the tables, and no record of it, for tests of stores
	// those builds wrote.
	logBesideTables bool
	// lowMarks bounds the low marks held (see lowmark.go); 0 means
	// maxLowMarks. Tests bound them lower.
	lowMarks int
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
	if o.StallLimit <= 0 {
		o.StallLimit = DefaultStallLimit
	}
	if o.exit == nil {
		o.exit = os.Exit
	}
	return o
}

// DB is an open embedded store. It implements store.Backend and
// store.Transactor through the portable layer (store.NewBackend), which
// checks every call before the engine sees it, and store.Purger (tally.go,
// purge.go).
type DB struct {
	// tables is the portable layer over this DB's driver.
	tables portableBackend
	db     *pebbledb.DB
	lock   *pebbledb.Lock
	now    func() time.Time
	admit  func(ctx context.Context) error
	locks  *locks
	// lowMarks let creates skip their existence read (see lowmark.go);
	// readsSkipped counts the reads they saved.
	lowMarks     *lowMarks
	readsSkipped atomic.Int64
	// etags counts writes; seeded from the clock so ETags stay unique across restarts.
	etags atomic.Uint64
	// rangeDels counts the range tombstones written since the last flush
	// this DB asked for (see flushRangeDels).
	rangeDels atomic.Int64
	// stageBytes is the size of the last Exclusive batch committed, which
	// the next one starts at (see stage).
	stageBytes atomic.Int64
	log        *slog.Logger
	// marks detects a MANIFEST cut short (see flushMarks).
	marks *flushMarks
	// wal records the newest write-ahead log (see walRecord).
	wal *walRecord
	// watch follows the engine's flushes, compactions and write stalls
	// (see failstop.go).
	watch *engineWatch

	// gate is held shared by the writes a running Exclusive may touch,
	// from their first read to their commit, and exclusively by Exclusive
	// and the tally backfill's sections, which then read and write with no
	// such write in flight; the writes that pass are counted in the
	// current epoch, whose horizon says which pass (see gate.go). Both are
	// taken before the lock stripes; exclusive orders the gate's exclusive
	// holders, and guards undrained, the epochs it has yet to wait out.
	gate      sync.RWMutex
	epoch     atomic.Pointer[entryEpoch]
	exclusive sync.Mutex
	undrained []*entryEpoch
	// minuteKeyed are the tables whose partition keys are capture minutes
	// (see MinuteKeyed), replaced whole under tallyMu.
	minuteKeyed atomic.Pointer[map[string]bool]
	// instantFirst are the tables whose every row key is of the
	// instant-first form (see instantfirst.go), replaced whole under tallyMu.
	instantFirst atomic.Pointer[instantFirstTables]
	// tallies are the tallied tables by table key, replaced whole under
	// the exclusive gate and tallyMu (see tally.go).
	tallies atomic.Pointer[map[string]*tallyState]
	tallyMu sync.Mutex
	// late are the purges' watches of late writes (see late.go), replaced
	// whole under lateMu.
	late   atomic.Pointer[[]*lateWatch]
	lateMu sync.Mutex
	// closing is cancelled by Close, ending the backfills counted in backfills.
	closing       context.Context
	stopBackfills context.CancelFunc
	backfills     sync.WaitGroup
}

// Open opens the database in opts.Dir, or creates it if the directory is
// missing or empty. A directory whose files are damaged, or that holds
// files but no complete store, is an error wrapping store.ErrCorrupt that
// names it; one that a restore or copy has not finished is ErrUnfinished,
// checked before anything else reads or writes it.
func Open(opts Options) (*DB, error) {
	opts = opts.withDefaults()
	if opts.Dir == "" {
		return nil, errors.New("pebble: Options.Dir is empty")
	}
	if err := checkUnfinished(opts.FS, opts.Dir, opts.AllowUnfinished); err != nil {
		return nil, err
	}
	marks := newFlushMarks(opts)
	wal := newWALRecord(opts)
	watch := newEngineWatch(opts, newFailStop(opts))
	db, lock, err := openEngine(opts, marks, wal, watch)
	if err == nil {
		if err = marks.check(db); err != nil {
			err = errors.Join(err, db.Close(), lock.Close())
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
	go watch.run()
	d := &DB{db: db, lock: lock, now: opts.Now, admit: opts.AdmitWrite, locks: newLocks(), lowMarks: newLowMarks(opts.lowMarks), log: opts.Logger, marks: marks, wal: wal,
		watch: watch}
	d.epoch.Store(newEpoch(nil))
	d.closing, d.stopBackfills = context.WithCancel(context.Background())
	d.etags.Store(uint64(time.Now().UnixNano()))
	d.tables = store.NewBackend(store.Driver{OpenTable: d.openTable, Transact: d.transact}).(portableBackend)
	if err := d.loadInstantFirst(); err != nil {
		return nil, errors.Join(err, d.Close())
	}
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

// openEngine locks the directory and opens Pebble on it. The lock is held
// from before the checks, so that they never look at (or change) a
// directory another process is serving.
func openEngine(opts Options, marks *flushMarks, wal *walRecord, watch *engineWatch) (*pebbledb.DB, *pebbledb.Lock, error) {
	if err := opts.FS.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, nil, err
	}
	lock, err := pebbledb.LockDirectory(opts.Dir, opts.FS)
	if err != nil {
		return nil, nil, err
	}
	db, err := openLocked(opts, marks, wal, watch, lock)
	if err != nil {
		return nil, nil, errors.Join(err, lock.Close())
	}
	return db, lock, nil
}

// openLocked checks what the engine cannot and opens it, turning a panic on
// files it cannot make sense of into a corruption error: the operator gets
// one message, not a stack.
func openLocked(opts Options, marks *flushMarks, wal *walRecord, watch *engineWatch, lock *pebbledb.Lock) (db *pebbledb.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("%w: %v", errOpenPanicked, p)
		}
	}()
	held, err := heldEntries(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	// Pebble starts a new store wherever it finds no MANIFEST marker, and
	// then deletes every table file as obsolete: only an empty directory
	// may become a store. Checked here before wal.check changes anything,
	// and by the engine (ErrorIfNotExists).
	if len(held) > 0 && !slices.ContainsFunc(held, func(name string) bool { return strings.HasPrefix(name, "marker.manifest.") }) {
		return nil, fmt.Errorf("%w: it holds %s but no store (its MANIFEST marker is missing)", errDamaged, entryList(held))
	}
	if err := wal.check(); err != nil {
		return nil, err
	}
	o := engineOptions(opts, watch)
	o.Lock = lock
	own := pebbledb.EventListener{FlushEnd: marks.flushed}
	if !opts.logBesideTables {
		walLayout(o, opts.FS)
		own.WALCreated = wal.created
	}
	listener := pebbledb.TeeEventListener(*o.EventListener, own)
	o.EventListener = &listener
	o.DisableAutomaticCompactions = opts.noCompactions
	o.ErrorIfNotExists = len(held) > 0
	db, err = pebbledb.Open(opts.Dir, o)
	switch {
	case errors.Is(err, pebbledb.ErrDBDoesNotExist):
		err = fmt.Errorf("%w: it holds %s but no store (its MANIFEST marker is missing)", errDamaged, entryList(held))
	case errors.Is(err, pebbledb.ErrDBNotPristine):
		// Without its format marker the engine takes the store for one being
		// created, and refuses it since it holds table files.
		err = fmt.Errorf("%w: its format-version marker is missing: %v", errDamaged, err)
	case err != nil && strings.Contains(err.Error(), "object size mismatch"):
		// A table file shorter or longer than the MANIFEST says: the engine
		// marks this error with no sentinel, and its text is all there is
		// (TestEveryFileOfTheStoreIsNeededOrOptional keeps the match honest).
		err = fmt.Errorf("%w: %v", errDamaged, err)
	}
	return db, err
}

// heldEntries lists what dir holds besides what an empty directory for a
// new store may: the lock, an empty log directory (both left by a start
// that failed), a file system's lost+found (the directory may be a
// volume's root) and the unfinished marker, which checkUnfinished has
// already ruled on (a copy marks its target before its first row).
func heldEntries(fs vfs.FS, dir string) ([]string, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	held := names[:0]
	for _, name := range names {
		switch name {
		case "LOCK", "lost+found", UnfinishedName:
			continue
		case walDirName:
			logs, err := fs.List(fs.PathJoin(dir, walDirName))
			if err == nil && len(logs) == 0 {
				continue
			}
		}
		held = append(held, name)
	}
	slices.Sort(held)
	return held, nil
}

// entryList names a few of a directory's entries.
func entryList(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
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

// Close flushes nothing it has not already synced and releases the
// database; the newest log's size is recorded once the engine has closed.
func (d *DB) Close() error {
	d.stopBackfills()
	d.backfills.Wait()
	d.marks.close()
	d.watch.close()
	err := d.db.Close()
	if err == nil {
		err = d.wal.closed()
	}
	return errors.Join(err, d.lock.Close())
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
	return d.ownTable(name)
}
