package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/metadatad/metadatad/internal/syncbuf"
	"github.com/metadatad/metadatad/store"
)

// failHarness runs the real engine on an in-memory filesystem whose
// operations fail with ENOSPC, as on a full disk, while full is set and
// fails says so; its clock moves only when the test steps it, and the exit
// the fail-stop calls is recorded instead of ending the test binary.
type failHarness struct {
	db    *DB
	full  atomic.Bool
	clock atomic.Int64
	exits chan int
	log   syncbuf.Buffer
}

func newFailHarness(t *testing.T, memTable uint64, fails func(op errorfs.Op) bool) *failHarness {
	t.Helper()
	h := &failHarness{exits: make(chan int, 16)}
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if h.full.Load() && fails(op) {
			return syscall.ENOSPC
		}
		return nil
	}))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db, err := Open(Options{Dir: "db", FS: fs, MemTableSize: memTable,
		Now:    func() time.Time { return start.Add(time.Duration(h.clock.Load())) },
		Logger: slog.New(slog.NewTextHandler(&h.log, nil)),
		// Like os.Exit, the exit never returns: the goroutine that calls
		// it stays blocked, holding whatever the engine held.
		exit: func(code int) { h.exits <- code; select {} }})
	if err != nil {
		t.Fatal(err)
	}
	h.db = db
	return h
}

func (h *failHarness) step(d time.Duration) { h.clock.Add(int64(d)) }

// insert writes one row of size bytes.
func (h *failHarness) insert(row int, size int) error {
	tbl, err := h.db.Table(context.Background(), "rows")
	if err != nil {
		return err
	}
	_, err = tbl.Insert(context.Background(), store.Entity{PartitionKey: "p", RowKey: fmt.Sprintf("r%06d", row),
		Properties: store.Properties{"v": strings.Repeat("x", size)}})
	return err
}

// until polls cond for up to 10 s: the engine's flushes run on their own
// goroutine.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
	}
}

// lines counts the log lines holding s.
func (h *failHarness) lines(s string) int { return strings.Count(h.log.String(), s) }

func (h *failHarness) exited() int { return len(h.exits) }

// waitExit waits up to 10 s for the fail-stop's exit and returns its status.
func (h *failHarness) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-h.exits:
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not stop within 10 s")
		return 0
	}
}

// sstWrites fails the writing of table files: flushes and compactions fail,
// the write-ahead log goes on.
func sstWrites(op errorfs.Op) bool {
	return op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".sst")
}

// TestFlushesFailingStopTheProcess: a flush that cannot write its table
// (the disk full, the log still writable) is retried by the engine at once
// and without end while writes queue behind it; once flushes have failed for
// flushFailWindow the process stops with exitFatal, and the log holds one
// line for the first failure and one for the stop, not one per retry.
func TestFlushesFailingStopTheProcess(t *testing.T) {
	h := newFailHarness(t, 1<<20, sstWrites)
	// The DB is left open: the flush goroutine is the one that stopped.
	if err := h.insert(0, 100); err != nil {
		t.Fatal(err)
	}
	h.full.Store(true)
	if _, err := h.db.db.AsyncFlush(); err != nil {
		t.Fatal(err)
	}
	until(t, "flushes reported failing", func() bool { return h.db.WritesBlocked() != nil })
	if !strings.Contains(h.db.WritesBlocked().Error(), "no space left on device") {
		t.Errorf("WritesBlocked: %v, want the cause", h.db.WritesBlocked())
	}
	if n := h.exited(); n != 0 {
		t.Fatalf("stopped %d times before flushes failed for %s", n, flushFailWindow)
	}
	h.step(flushFailWindow)
	if code := h.waitExit(t); code != exitFatal {
		t.Fatalf("exit status %d, want %d", code, exitFatal)
	}
	for _, tc := range []struct {
		line string
		want int
	}{
		{"storage engine failed", 1},
		{"flushes have failed for", 1},
		{"a flush failed", 1},
		{"background error", 0},
	} {
		if got := h.lines(tc.line); got != tc.want {
			t.Errorf("%d log lines with %q, want %d; log:\n%s", got, tc.line, tc.want, h.log.String())
		}
	}
}

// TestFlushFailingForAMomentGoesOn: flushes that fail and then pass before
// flushFailWindow (a compaction gave its space back) stop nothing, and the
// next failure, however much later, starts a window of its own.
func TestFlushFailingForAMomentGoesOn(t *testing.T) {
	h := newFailHarness(t, 1<<20, sstWrites)
	defer h.db.Close()
	for i := range 2 {
		if err := h.insert(i, 100); err != nil {
			t.Fatal(err)
		}
		h.full.Store(true)
		if _, err := h.db.db.AsyncFlush(); err != nil {
			t.Fatal(err)
		}
		until(t, "flushes reported failing", func() bool { return h.db.WritesBlocked() != nil })
		h.step(flushFailWindow - time.Second)
		h.full.Store(false)
		until(t, "flushes succeed again", func() bool { return h.db.WritesBlocked() == nil })
		h.step(time.Hour)
	}
	if n := h.exited(); n != 0 {
		t.Fatalf("stopped %d times, though no flush failed for %s", n, flushFailWindow)
	}
	if got := h.lines("flushes succeed again"); got != 2 {
		t.Errorf("%d log lines say flushes succeed again, want 2; log:\n%s", got, h.log.String())
	}
}

// TestLogFailuresStopTheProcessOnce: a write-ahead log that cannot be
// written, or created when a full memtable moves writes to the next one,
// stops the process once, with one log line, however many commits meet it.
// Left to the engine, the first fails each commit of the group sharing the
// sync, each calling Fatalf, and the second panics in a way that kills the
// process with status 2.
func TestLogFailuresStopTheProcessOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails func(op errorfs.Op) bool
		want  string
	}{
		{"write", func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ".log")
		}, "write-ahead log: write"},
		{"create", func(op errorfs.Op) bool {
			return (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite) && strings.HasSuffix(op.Path, ".log")
		}, "write-ahead log: create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFailHarness(t, 1<<20, tc.fails)
			// The DB is left open: its commit pipeline is held by the
			// commit that stopped.
			h.full.Store(true)
			// Rows of 16 KiB fill the first memtable (256 KiB, the engine
			// ramps up to MemTableSize) within 16 commits.
			for i := range 8 {
				go func() {
					for j := range 8 {
						if h.insert(i*8+j, 16<<10) != nil {
							return
						}
					}
				}()
			}
			if code := h.waitExit(t); code != exitFatal {
				t.Fatalf("exit status %d, want %d", code, exitFatal)
			}
			if got := h.lines("storage engine failed"); got != 1 {
				t.Errorf("%d log lines say the engine failed, want 1; log:\n%s", got, h.log.String())
			}
			if got := h.lines(tc.want); got != 1 {
				t.Errorf("%d log lines with %q, want 1; log:\n%s", got, tc.want, h.log.String())
			}
		})
	}
}

// TestCheckpointLogCopyFailureStopsNothing: a checkpoint copies the log
// into its own directory (inside the data directory for a backup); a
// failure there fails the checkpoint, not the process.
func TestCheckpointLogCopyFailureStopsNothing(t *testing.T) {
	h := newFailHarness(t, 1<<20, func(op errorfs.Op) bool {
		return strings.HasPrefix(op.Path, "db/scratch/") && strings.HasSuffix(op.Path, ".log")
	})
	defer h.db.Close()
	if err := h.insert(0, 100); err != nil {
		t.Fatal(err)
	}
	h.full.Store(true)
	// A stop would block the checkpoint for good.
	done := make(chan error, 1)
	go func() { done <- h.db.Checkpoint("db/scratch/checkpoint") }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("checkpoint succeeded though its log copy failed")
		}
	case <-h.exits:
		t.Fatal("a failed checkpoint stopped the process")
	}
	if err := h.insert(1, 100); err != nil {
		t.Fatalf("write after the failed checkpoint: %v", err)
	}
}

// TestBackgroundErrorsLogAMinute: a compaction that cannot write its
// output fails again at once; its errors take one line a minute, which
// counts them, not one each.
func TestBackgroundErrorsLogAMinute(t *testing.T) {
	var log syncbuf.Buffer
	var clock time.Duration
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opts := Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Now: func() time.Time { return start.Add(clock) }}
	w := newEngineWatch(opts, newFailStop(opts))
	for range 3 {
		for range 100 {
			w.backgroundError(errors.New("compaction: no space left on device"))
			clock += 100 * time.Millisecond
		}
		clock += time.Minute
	}
	if got, want := strings.Count(log.String(), "background error"), 3; got != want {
		t.Errorf("%d lines for 300 errors over 3 minutes, want %d:\n%s", got, want, log.String())
	}
	if !strings.Contains(log.String(), "errors_since_last_line=100") {
		t.Errorf("the lines do not count the errors:\n%s", log.String())
	}
}

// TestFailStopLogsOnce: engine errors met at once on several goroutines
// (a flush giving up while a commit's log write fails) stop the process
// once, with one line.
func TestFailStopLogsOnce(t *testing.T) {
	var log syncbuf.Buffer
	var exits atomic.Int32
	// This exit returns, so that the test sees what a second caller does.
	f := &failStop{log: slog.New(slog.NewTextHandler(&log, nil)), dir: "db", exit: func(int) { exits.Add(1) }}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { f.stop(fmt.Sprintf("cause %d", i)) })
	}
	wg.Wait()
	if n := exits.Load(); n != 1 {
		t.Errorf("exit called %d times, want once", n)
	}
	if n := strings.Count(log.String(), "storage engine failed"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%s", n, log.String())
	}
}

// TestStalledWritesWithFailingCompactionsStopTheProcess: writes that stay
// stalled while compactions fail, none succeeding, for the stall limit
// stop the process, with one line when both begin and one for the stop;
// a stall alone, failures alone, and either cut short by its end (a
// compaction that succeeds, writes that flow) stop nothing and start the
// count afresh. Time is synctest's, so a check comes from the watch's own
// loop when the engine reports nothing more, as a stalled engine whose
// failed compaction's span is set aside does.
func TestStalledWritesWithFailingCompactionsStopTheProcess(t *testing.T) {
	const limit = time.Minute
	failed := pebbledb.CompactionInfo{Err: fmt.Errorf("write 000042.sst: %w", syscall.ENOSPC)}
	stall := pebbledb.WriteStallBeginInfo{Reason: "L0 file count limit exceeded"}
	for _, tc := range []struct {
		name string
		// events happen in turn, with a sleep of the given duration
		events   func(w *engineWatch, sleep func(time.Duration))
		wantStop bool
	}{
		{"a stall while compactions fail, for the limit", func(w *engineWatch, sleep func(time.Duration)) {
			w.writeStallBegin(stall)
			w.compactionEnd(failed)
			sleep(limit)
		}, true},
		{"compactions failing since before the stall", func(w *engineWatch, sleep func(time.Duration)) {
			w.compactionEnd(failed)
			w.flushEnd(pebbledb.FlushInfo{}) // flushes succeed until level 0 is full
			sleep(limit / 2)
			w.writeStallBegin(stall)
			sleep(limit)
		}, true},
		{"a stall while compactions fail, short of the limit", func(w *engineWatch, sleep func(time.Duration)) {
			w.writeStallBegin(stall)
			w.compactionEnd(failed)
			sleep(limit - time.Second)
		}, false},
		{"a stall alone", func(w *engineWatch, sleep func(time.Duration)) {
			w.writeStallBegin(stall)
			sleep(10 * limit)
		}, false},
		{"compactions failing alone", func(w *engineWatch, sleep func(time.Duration)) {
			for range 100 {
				w.compactionEnd(failed)
				sleep(limit / 10)
			}
		}, false},
		{"a compaction that succeeds starts the count afresh", func(w *engineWatch, sleep func(time.Duration)) {
			w.writeStallBegin(stall)
			w.compactionEnd(failed)
			sleep(limit - time.Second)
			w.compactionEnd(pebbledb.CompactionInfo{})
			w.compactionEnd(failed)
			sleep(limit - time.Second)
		}, false},
		{"a cancelled compaction neither fails nor succeeds", func(w *engineWatch, sleep func(time.Duration)) {
			w.writeStallBegin(stall)
			w.compactionEnd(pebbledb.CompactionInfo{Err: pebbledb.ErrCancelledCompaction})
			sleep(limit)
			w.compactionEnd(failed)
			sleep(limit - time.Second)
			w.compactionEnd(pebbledb.CompactionInfo{Err: pebbledb.ErrCancelledCompaction})
			sleep(time.Second)
		}, true},
		{"writes that flow start the count afresh", func(w *engineWatch, sleep func(time.Duration)) {
			w.writeStallBegin(stall)
			w.compactionEnd(failed)
			sleep(limit - time.Second)
			w.writeStallEnd()
			w.writeStallBegin(stall)
			sleep(limit - time.Second)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log syncbuf.Buffer
				var exits atomic.Int32
				opts := Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Now: time.Now, StallLimit: limit}
				w := newEngineWatch(opts, &failStop{log: opts.Logger, dir: "db", exit: func(int) { exits.Add(1) }})
				go w.run()
				defer w.close()
				tc.events(w, func(d time.Duration) { time.Sleep(d); synctest.Wait() })
				if got := exits.Load() == 1; got != tc.wantStop {
					t.Fatalf("stopped: %v, want %v; log:\n%s", got, tc.wantStop, log.String())
				}
				if !tc.wantStop {
					return
				}
				for line, want := range map[string]int{
					"writes stall while compactions fail": 1,
					"storage engine failed":               1,
					"writes have stalled for":             1,
				} {
					if got := strings.Count(log.String(), line); got != want {
						t.Errorf("%d log lines with %q, want %d; log:\n%s", got, line, want, log.String())
					}
				}
			})
		})
	}
}

// TestStalledWritesWithFailingCompactionsAreBlocked: writes count as
// blocked (the daemon's NOT_SERVING) from the moment they stall while
// compactions fail, and no longer once either ends.
func TestStalledWritesWithFailingCompactionsAreBlocked(t *testing.T) {
	opts := Options{Logger: slog.New(slog.DiscardHandler), Now: time.Now, StallLimit: time.Minute}
	w := newEngineWatch(opts, &failStop{log: opts.Logger, dir: "db", exit: func(int) { t.Error("stopped") }})
	failed := pebbledb.CompactionInfo{Err: fmt.Errorf("write 000042.sst: %w", syscall.ENOSPC)}
	steps := []struct {
		name        string
		event       func()
		wantBlocked bool
	}{
		{"writes stall", func() { w.writeStallBegin(pebbledb.WriteStallBeginInfo{Reason: "L0 file count limit exceeded"}) }, false},
		{"a compaction fails", func() { w.compactionEnd(failed) }, true},
		{"writes flow", w.writeStallEnd, false},
		{"writes stall again", func() { w.writeStallBegin(pebbledb.WriteStallBeginInfo{Reason: "L0 file count limit exceeded"}) }, true},
		{"a compaction succeeds", func() { w.compactionEnd(pebbledb.CompactionInfo{}) }, false},
	}
	for _, s := range steps {
		s.event()
		err := w.blocked()
		if (err != nil) != s.wantBlocked {
			t.Errorf("%s: blocked() = %v, want blocked %v", s.name, err, s.wantBlocked)
		}
		if err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s: blocked() = %v, want the compaction's cause", s.name, err)
		}
	}
}
