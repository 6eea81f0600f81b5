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
// that cannot be flushed, or a level 0 that cannot be compacted, holds
// writes back for good. So four paths end in the one stop below, each with
// one log line: Pebble's own Fatalf (a failed MANIFEST write, a commit
// whose log write failed); a failed write, sync or creation of a log file
// (logFS), which Pebble meets with Fatalf in a commit but with a panic when
// it switches to the next log; flushes that keep failing; and writes that
// stay stalled while compactions keep failing (both in engineWatch).

// exitFatal is the process's exit status after a fatal engine error.
const exitFatal = 70

// flushFailWindow is how long flushes may go on failing, with no flush
// succeeding, before the process stops. Pebble retries a failed flush at
// once and without end, and once memtablesQueued memtables wait for it every
// write waits too, so a flush that cannot complete stalls the store for
// good. But a flush can fail for a moment and then pass: on a disk nearly
// full, a compaction's output holds space until that compaction ends or
// fails and deletes it. A few seconds covers a compaction giving its space
// back; a disk still full after them stays full until an operator frees
// space, and stopping then keeps every acknowledged write.
const flushFailWindow = 5 * time.Second

// DefaultStallLimit is Options.StallLimit's default: how long writes may
// stay stalled while compactions fail, with none succeeding, before the
// process stops.
//
// The engine stalls writes when level 0 holds too many sublevels (12), and
// only a compaction out of level 0 ends that stall. On a disk too full for
// the compaction's output it fails, the engine tries again (or, for a
// while, not at all: it sets a failed compaction's span aside), every
// write waits, and nothing changes until an operator frees space; no flush
// fails, for none can start. So the process stops when both signs have
// lasted the limit: writes stalled without a break, and compactions
// failing since the first failure with none succeeding. A stall alone is
// a busy disk that a compaction will end; failures that clear (a
// compaction gave its space back) end with the first compaction that
// succeeds, as does the count. A minute is well past the compaction that
// ends a stall on a disk that works (at the default 64 MiB memtable, level
// 0 holds under a GiB then, rewritten in seconds to tens of seconds), and
// short against a stall that lasts for good, whose writes time out all
// along; writes are reported blocked (NOT_SERVING) from the moment both
// signs meet.
const DefaultStallLimit = time.Minute

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

// engineWatch follows the engine's flushes, compactions, write stalls and
// background errors. It stops the process once flushes have failed for
// flushFailWindow, or once writes have stalled while compactions fail for
// the stall limit (see both), reports either meanwhile, and keeps the
// engine's retries, which come as fast as they fail, from flooding the log.
type engineWatch struct {
	now   func() time.Time
	log   *slog.Logger
	stop  *failStop
	limit time.Duration
	// done ends run; closed by close.
	done      chan struct{}
	closeOnce sync.Once

	mu sync.Mutex
	// ended is the error of the last flush, until the engine reports it as
	// a background error: Pebble reports a flush that succeeded with
	// nothing to write with an error too, but not as a background error.
	ended error
	// flushes and compactions are the failures of each kind of job going
	// on now, zero while that kind succeeds.
	flushes, compactions failing
	// stalled is when the write stall under way began, zero while writes
	// flow; stallReason is the engine's reason for it.
	stalled     time.Time
	stallReason string
	// stuckLogged is set once the stall with compactions failing has been
	// logged, until it ends.
	stuckLogged bool
	// others counts the other background errors since othersLogged, the
	// last line about one.
	others       int
	othersLogged time.Time
}

// failing is a run of failures of one kind of background job with none
// succeeding: since the first, how many, and the latest's error.
type failing struct {
	since    time.Time
	failures int
	last     error
}

func (f *failing) fail(now time.Time, err error) {
	if f.since.IsZero() {
		f.since = now
	}
	f.failures++
	f.last = err
}

func newEngineWatch(opts Options, stop *failStop) *engineWatch {
	return &engineWatch{now: opts.Now, log: opts.Logger, stop: stop, limit: opts.StallLimit, done: make(chan struct{})}
}

// flushEnd is the EventListener's FlushEnd.
func (w *engineWatch) flushEnd(info pebbledb.FlushInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if info.Err != nil {
		w.ended = info.Err
		return
	}
	w.ended = nil
	if !w.flushes.since.IsZero() {
		w.log.Info("pebble: flushes succeed again", "failed_flushes", w.flushes.failures)
	}
	w.flushes = failing{}
}

// compactionEnd is the EventListener's CompactionEnd. A compaction the
// engine cancelled (another took its files) neither failed nor succeeded.
func (w *engineWatch) compactionEnd(info pebbledb.CompactionInfo) {
	if errors.Is(info.Err, pebbledb.ErrCancelledCompaction) {
		return
	}
	w.mu.Lock()
	if info.Err == nil {
		w.compactions = failing{}
		w.endStuck("a compaction succeeded")
		w.mu.Unlock()
		return
	}
	w.compactions.fail(w.now(), info.Err)
	w.mu.Unlock()
	w.check()
}

// writeStallBegin is the EventListener's WriteStallBegin.
func (w *engineWatch) writeStallBegin(info pebbledb.WriteStallBeginInfo) {
	w.mu.Lock()
	w.stalled, w.stallReason = w.now(), info.Reason
	w.mu.Unlock()
	w.check()
}

// writeStallEnd is the EventListener's WriteStallEnd.
func (w *engineWatch) writeStallEnd() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stalled, w.stallReason = time.Time{}, ""
	w.endStuck("writes flow again")
}

// endStuck logs the end of a stall with compactions failing, if one was
// logged; w.mu is held.
func (w *engineWatch) endStuck(why string) {
	if w.stuckLogged {
		w.log.Info("pebble: writes no longer stall behind failing compactions: " + why)
		w.stuckLogged = false
	}
}

// backgroundError is the EventListener's BackgroundError. A flush's error
// comes right after its flushEnd, on the same goroutine.
func (w *engineWatch) backgroundError(err error) {
	w.mu.Lock()
	if w.ended == nil || !errors.Is(err, w.ended) {
		// Another job's error (a compaction, which compactionEnd counts, or
		// a table's statistics): logged, unless flushes are failing, when
		// it is the same trouble and the stop is coming. A compaction that
		// cannot write its output on a nearly full disk fails again at
		// once, so one line a minute says how many failed.
		w.others++
		if now := w.now(); w.flushes.since.IsZero() && (w.othersLogged.IsZero() || now.Sub(w.othersLogged) >= time.Minute) {
			w.log.Error("pebble: background error", "err", err, "errors_since_last_line", w.others)
			w.others, w.othersLogged = 0, now
		}
		w.mu.Unlock()
		return
	}
	w.ended = nil
	if w.flushes.since.IsZero() {
		w.log.Error("pebble: a flush failed; the engine retries it, and the process stops if flushes go on failing",
			"err", err, "stop_after", flushFailWindow)
	}
	w.flushes.fail(w.now(), err)
	w.mu.Unlock()
	w.check()
}

// check stops the process if flushes have failed for flushFailWindow, or
// if writes have stalled for the stall limit while compactions have failed
// for as long with none succeeding (see DefaultStallLimit), and logs the
// first moment of a stall with compactions failing. It is called at each
// event and by run, since a stalled engine may report nothing more.
func (w *engineWatch) check() {
	w.mu.Lock()
	now := w.now()
	var cause string
	switch {
	case !w.flushes.since.IsZero() && now.Sub(w.flushes.since) >= flushFailWindow:
		cause = fmt.Sprintf("pebble: flushes have failed for %s (%d attempts), so writes cannot go on: %v",
			now.Sub(w.flushes.since).Round(time.Millisecond), w.flushes.failures, w.flushes.last)
	case !w.stalled.IsZero() && !w.compactions.since.IsZero():
		stalled, failed := now.Sub(w.stalled), now.Sub(w.compactions.since)
		if stalled >= w.limit && failed >= w.limit {
			cause = fmt.Sprintf("pebble: writes have stalled for %s (%s) while compactions failed for %s (%d attempts, none succeeding), so writes cannot go on: %v",
				stalled.Round(time.Millisecond), w.stallReason, failed.Round(time.Millisecond), w.compactions.failures, w.compactions.last)
		} else if !w.stuckLogged {
			w.stuckLogged = true
			w.log.Error("pebble: writes stall while compactions fail; the engine retries them, and the process stops if both go on",
				"reason", w.stallReason, "err", w.compactions.last, "stop_after", w.limit)
		}
	}
	w.mu.Unlock()
	if cause != "" {
		w.stop.stop(cause)
	}
}

// run calls check every tenth of the stall limit (between a millisecond
// and a second) until close: a compaction that failed may not be tried
// again for a while, and a stalled engine then reports nothing more.
func (w *engineWatch) run() {
	t := time.NewTicker(min(max(w.limit/10, time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.check()
		}
	}
}

// close ends run. Only the first call does anything.
func (w *engineWatch) close() { w.closeOnce.Do(func() { close(w.done) }) }

// blocked is nil while writes can go on, else an error saying why not:
// flushes failing, or writes stalled while compactions fail.
func (w *engineWatch) blocked() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.flushes.since.IsZero() {
		return fmt.Errorf("pebble: flushes failing since %s (%d attempts): %w", w.flushes.since.Format(time.RFC3339), w.flushes.failures, w.flushes.last)
	}
	if !w.stalled.IsZero() && !w.compactions.since.IsZero() {
		return fmt.Errorf("pebble: writes stalled since %s (%s), compactions failing since %s (%d attempts): %w",
			w.stalled.Format(time.RFC3339), w.stallReason, w.compactions.since.Format(time.RFC3339), w.compactions.failures, w.compactions.last)
	}
	return nil
}

// WritesBlocked is nil while the engine takes writes. While its flushes
// fail, or writes stall while its compactions fail, it says why; writes
// then wait, and the process stops if that goes on (a disk full with the
// free-space guard off; see failstop.go). The daemon reports writes
// NOT_SERVING meanwhile.
func (d *DB) WritesBlocked() error { return d.watch.blocked() }
