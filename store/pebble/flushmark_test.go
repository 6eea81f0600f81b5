package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// recordedMark reads the flush mark the store has recorded in dir, 0 for none.
func recordedMark(t *testing.T, fs vfs.FS, dir string) uint64 {
	t.Helper()
	f, err := fs.Open(fs.PathJoin(dir, pebble.MarkFileName))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 64)
	n, _ := f.Read(b)
	// The file holds the recorded mark, then the oldest kept.
	first, _, _ := strings.Cut(strings.TrimSpace(string(b[:n])), " ")
	v, err := strconv.ParseUint(first, 10, 64)
	if err != nil {
		t.Fatalf("%s holds %q: %v", pebble.MarkFileName, b[:n], err)
	}
	return v
}

// awaitMarkPast waits until the recorded mark passes after.
func awaitMarkPast(t *testing.T, fs vfs.FS, dir string, after uint64) uint64 {
	t.Helper()
	// Generous: the mark is written by a background goroutine with its own
	// synced write, which a loaded 2-core machine running other suites'
	// fsyncs has delayed past 10 s; a wait that passes costs nothing.
	deadline := time.Now().Add(time.Minute)
	for {
		if m := recordedMark(t, fs, dir); m > after {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recorded flush mark stayed at %d after a flush", after)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// insertRows writes rows [from, to) into partition p of tbl, then flushes
// them into a table file and waits until the flush's mark is recorded.
func insertFlushed(t *testing.T, db *pebble.DB, tbl store.Table, dir string, from, to int, mark uint64) uint64 {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := tbl.Insert(t.Context(), store.Entity{PartitionKey: "p", RowKey: fmt.Sprintf("%04d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pebble.Flush(db); err != nil {
		t.Fatal(err)
	}
	return awaitMarkPast(t, vfs.Default, dir, mark)
}

// newestManifest is the path of the MANIFEST file with the highest number.
func newestManifest(t *testing.T, dir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no MANIFEST in %s: %v", dir, err)
	}
	slices.Sort(names)
	return names[len(names)-1]
}

// TestManifestCutShortRefusesToOpen cuts the MANIFEST back to what it held
// before the last flushes were recorded, as a bad disk or a truncated copy
// would, and the store must refuse to open, saying the directory is
// damaged. The engine alone meets the cut in one of two ways:
//   - compactions ran after the cut point, so the MANIFEST names table files
//     that they replaced and deleted: the engine refuses to open, blaming a
//     missing file;
//   - no compaction ran: the engine opens without a word and without the
//     flushed rows (checked on a read-only engine, so the test shows a real
//     loss that only the flush marks catch).
func TestManifestCutShortRefusesToOpen(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         func(pebble.Options) pebble.Options
		engineRefuse bool
	}{
		{"after compactions", func(o pebble.Options) pebble.Options { return o }, true},
		{"flushes only", pebble.WithoutCompactions, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := pebble.Open(tc.opts(pebble.Options{Dir: dir}))
			if err != nil {
				t.Fatal(err)
			}
			tbl, _ := db.Table(t.Context(), "Rows")
			mark := insertFlushed(t, db, tbl, dir, 0, 100, 0)
			manifest := newestManifest(t, dir)
			info, err := os.Stat(manifest)
			if err != nil {
				t.Fatal(err)
			}
			cut := info.Size()
			// Four more flushes: enough L0 files for a compaction, where one
			// may run, and enough new log files that the engine has deleted
			// (not just kept for reuse) those of the rows the cut takes.
			for f := range 4 {
				mark = insertFlushed(t, db, tbl, dir, 100+100*f, 200+100*f, mark)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if m := newestManifest(t, dir); m != manifest {
				t.Fatalf("the engine moved to a new MANIFEST (%s after %s); the cut would not take the last flushes", m, manifest)
			}
			if err := os.Truncate(manifest, cut); err != nil {
				t.Fatal(err)
			}

			raw, err := pebbledb.Open(dir, pebble.WALLayout(&pebbledb.Options{ReadOnly: true, Logger: quietPebble{}}))
			if tc.engineRefuse {
				if err == nil {
					raw.Close()
					t.Fatal("the engine opened the cut MANIFEST: no compaction deleted a file it names")
				}
			} else {
				if err != nil {
					t.Fatalf("the engine refuses the cut MANIFEST (%v), want it to open without the flushed rows", err)
				}
				_, closer, err := raw.Get(append([]byte("rows\x00p\x00"), "0150"...))
				if err == nil {
					closer.Close()
				}
				raw.Close()
				if !errors.Is(err, pebbledb.ErrNotFound) {
					t.Fatalf("a row of the cut flushes reads %v on the engine alone, want it lost (else the test proves nothing)", err)
				}
			}

			_, err = pebble.Open(tc.opts(pebble.Options{Dir: dir}))
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "is damaged") || !strings.Contains(err.Error(), dir) {
				t.Fatalf("open of a store whose MANIFEST was cut short: %v, want a damaged-directory error naming %s", err, dir)
			}
		})
	}
}

// TestFlushMarksSurviveEveryCrash takes the filesystem as a power loss
// would leave it, at random instants while writes, flushes and the marks'
// own writes go on: every copy must open, since a crash is no damage.
func TestFlushMarksSurviveEveryCrash(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tbl, _ := db.Table(ctx, "Rows")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := tbl.Insert(ctx, store.Entity{PartitionKey: "p", RowKey: fmt.Sprintf("%08d", i),
				Properties: store.Properties{"Blob": strings.Repeat("x", 500)}}); err != nil {
				t.Error(err)
				return
			}
			if i%200 == 0 {
				if err := pebble.Flush(db); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	rng := rand.New(rand.NewPCG(1, 2))
	var checked, marked int
	for range 40 {
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
		if recordedMark(t, crashed, "db") > 0 {
			marked++
		}
		reopened, err := pebble.Open(pebble.Options{Dir: "db", FS: crashed})
		if err != nil {
			t.Fatalf("open after a crash: %v", err)
		}
		if err := reopened.Close(); err != nil {
			t.Fatal(err)
		}
		checked++
	}
	if marked < checked/2 {
		t.Fatalf("only %d of %d crash copies had a recorded mark: the test checks little", marked, checked)
	}
}

// TestDamagedMarkFileRefusesToOpen: a mark file that does not hold a mark
// is damage too, and says so.
func TestDamagedMarkFileRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(pebble.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := db.Table(t.Context(), "Rows")
	insertFlushed(t, db, tbl, dir, 0, 10, 0)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pebble.MarkFileName), []byte("\x00\x17garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pebble.Open(pebble.Options{Dir: dir}); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), pebble.MarkFileName) {
		t.Fatalf("open with a damaged mark file: %v, want a damaged-directory error naming it", err)
	}
}

// quietPebble keeps the engine's messages out of the test output.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
