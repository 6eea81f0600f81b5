package pebble

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Fail-stop: the engine errors after which the store cannot go on.
//
// Every acknowledged write was synced to the write-ahead log before its
// reply, so stopping the process loses none of them: the next start (after
// space is freed) replays the log. Going on can lose them, or hang: a commit
// that failed half way leaves the commit pipeline locked, and a memtable
// that cannot be flushed holds writes back for good. So three paths end in
// the one stop below, each with one log line: Pebble's own Fatalf (a failed
// MANIFEST write, a commit whose log write failed); a failed write, sync or
// creation of a log file (logFS), which Pebble meets with Fatalf in a
// commit but with a panic when it switches to the next log; and flushes
// that keep failing (flushWatch).

// exitFatal is the process's exit status after a fatal engine error.
const exitFatal = 70

// flushFailWindow is how long flushes may go on failing, with no flush
// succeeding, before the process stops. Pebble retries a failed flush at
// once and without end, and once memtablesQueued memtables wait for it every
// write waits too, so a flush that cannot complete stalls the store for
// good. But a flush can fail for a moment and then pass: on a disk nearly
// full, a compaction's output holds space until that compaction ends or
// fails and deletes it. A compaction that fails is only retried (writes do
// not wait for it) and is not counted. A few seconds covers a compaction
// giving its space back; a disk still full after them stays full until an
// operator frees space, and stopping then keeps every acknowledged write.
const flushFailWindow = 5 * time.Second

// failStop ends the process after a fatal engine error, with one log line
// however many goroutines meet the error at once (each commit of a group
// whose log write failed reports it): the first stops the process, the
// others wait for it.
type failStop struct {
	log  *slog.Logger
	dir  string
	exit func(code int)
	once sync.Once
}

func newFailStop(opts Options) *failStop {
	return &failStop{log: opts.Logger, dir: opts.Dir, exit: opts.exit}
}

func (f *failStop) stop(cause string) {
	f.once.Do(func() {
		f.log.Error("storage engine failed; stopping the process", "data_dir", f.dir, "err", cause, "exit_status", exitFatal)
		f.exit(exitFatal)
	})
}

// logFS stops the process at the first failed creation, write or sync of a
// write-ahead log file, before the engine sees the error. In a commit the
// engine would call Fatalf; but switching to the next log (the memtable
// full) it panics, after unlocking the mutex that a deferred unlock then
// unlocks again: the runtime kills the process with a stack of every
// goroutine and status 2. Other files pass through untouched, among them
// the copies of the log a checkpoint writes elsewhere.
type logFS struct {
	vfs.FS
	// engine is the engine's options, whose WALDir (the data directory
	// dir when empty, else relative to it) holds the write-ahead logs.
	engine *pebbledb.Options
	dir    string
	stop   *failStop
}

func (fs logFS) isLog(name string) bool {
	dir := fs.engine.WALDir
	if dir == "" {
		dir = fs.dir
	}
	// The log directory is named relative to the store (walLayout), so that
	// a copied store names its own.
	if rest, ok := strings.CutPrefix(dir, pebbledb.MakeStoreRelativePath(fs.FS, "")); ok {
		dir = fs.dir + rest
	}
	return strings.HasSuffix(name, ".log") && filepath.Clean(fs.PathDir(name)) == filepath.Clean(dir)
}

func (fs logFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(name, "create", f, err)
}

func (fs logFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(newname, "reuse", f, err)
}

func (fs logFS) wrap(name, op string, f vfs.File, err error) (vfs.File, error) {
	if !fs.isLog(name) {
		return f, err
	}
	if err != nil {
		fs.stop.stop(fmt.Sprintf("write-ahead log: %s %s: %v", op, name, err))
		return nil, err
	}
	return logFile{File: f, name: name, stop: fs.stop}, nil
}

// logFile is a write-ahead log file of logFS. Preallocate is left alone:
// the engine ignores its errors, and the writes then tell.
type logFile struct {
	vfs.File
	name string
	stop *failStop
}

func (f logFile) check(op string, err error) error {
	if err != nil {
		f.stop.stop(fmt.Sprintf("write-ahead log: %s %s: %v", op, f.name, err))
	}
	return err
}

func (f logFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.check("write", err)
}

func (f logFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.check("write", err)
}

func (f logFile) Sync() error { return f.check("sync", f.File.Sync()) }

func (f logFile) SyncData() error { return f.check("sync", f.File.SyncData()) }

func (f logFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.check("sync", err)
}

func (f logFile) Close() error { return f.check("close", f.File.Close()) }

// slogLogger routes the engine's messages to slog.
type slogLogger struct {
	l    *slog.Logger
	stop *failStop
}

func (s slogLogger) Infof(format string, args ...any) { s.l.Debug(fmt.Sprintf(format, args...)) }

func (s slogLogger) Errorf(format string, args ...any) { s.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf ends the process. Pebble calls it when its own state can no longer
// be trusted (a commit that failed half way leaves the commit pipeline
// locked): a panic here would be recovered inside the call that met it and
// the server would go on acknowledging writes that a restart then loses.
func (s slogLogger) Fatalf(format string, args ...any) {
	s.stop.stop(fmt.Sprintf(format, args...))
}

// flushWatch follows the engine's flushes and background errors: it stops
// the process once flushes have failed for flushFailWindow (see there),
// reports them failing meanwhile, and keeps the engine's retries, which
// come as fast as they fail, from flooding the log.
type flushWatch struct {
	now  func() time.Time
	log  *slog.Logger
	stop *failStop

	mu sync.Mutex
	// ended is the error of the last flush, until the engine reports it as
	// a background error: Pebble reports a flush that succeeded with
	// nothing to write with an error too, but not as a background error.
	ended error
	// since is the first failure of the flushes failing now, zero while
	// they succeed; failures counts them and last is the latest.
	since    time.Time
	failures int
	last     error
	// others counts the other background errors since othersLogged, the
	// last line about one.
	others       int
	othersLogged time.Time
}

func newFlushWatch(opts Options, stop *failStop) *flushWatch {
	return &flushWatch{now: opts.Now, log: opts.Logger, stop: stop}
}

// flushEnd is the EventListener's FlushEnd.
func (w *flushWatch) flushEnd(info pebbledb.FlushInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if info.Err != nil {
		w.ended = info.Err
		return
	}
	w.ended = nil
	if !w.since.IsZero() {
		w.log.Info("pebble: flushes succeed again", "failed_flushes", w.failures)
	}
	w.since, w.failures, w.last = time.Time{}, 0, nil
}

// backgroundError is the EventListener's BackgroundError. A flush's error
// comes right after its flushEnd, on the same goroutine.
func (w *flushWatch) backgroundError(err error) {
	w.mu.Lock()
	if w.ended == nil || !errors.Is(err, w.ended) {
		// Another job's error (a compaction, retried by the engine, which
		// writes do not wait for): logged, unless flushes are failing, when
		// it is the same trouble and the stop is coming. A compaction that
		// cannot write its output on a nearly full disk fails again at
		// once, so one line a minute says how many failed.
		w.others++
		if now := w.now(); w.since.IsZero() && (w.othersLogged.IsZero() || now.Sub(w.othersLogged) >= time.Minute) {
			w.log.Error("pebble: background error", "err", err, "errors_since_last_line", w.others)
			w.others, w.othersLogged = 0, now
		}
		w.mu.Unlock()
		return
	}
	w.ended = nil
	now := w.now()
	if w.since.IsZero() {
		w.since = now
		w.log.Error("pebble: a flush failed; the engine retries it, and the process stops if flushes go on failing",
			"err", err, "stop_after", flushFailWindow)
	}
	w.failures++
	w.last = err
	failing := now.Sub(w.since)
	n := w.failures
	w.mu.Unlock()
	if failing >= flushFailWindow {
		w.stop.stop(fmt.Sprintf("pebble: flushes have failed for %s (%d attempts), so writes cannot go on: %v", failing.Round(time.Millisecond), n, err))
	}
}

// failing is nil while flushes succeed, else an error saying since when
// they fail and why.
func (w *flushWatch) failing() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		return nil
	}
	return fmt.Errorf("pebble: flushes failing since %s (%d attempts): %w", w.since.Format(time.RFC3339), w.failures, w.last)
}

// FlushesFailing is nil while the engine's flushes succeed. While they
// fail it says why; writes then queue behind them, and the process stops
// if they go on failing (a disk full with the free-space guard off). The
// daemon reports writes NOT_SERVING meanwhile.
func (d *DB) FlushesFailing() error { return d.flushes.failing() }
