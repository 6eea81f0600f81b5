package pebble_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// seededRows is how many rows seedStore writes: the first flushed into
// table files, the last only in the write-ahead log.
const seededRows, seededInLog = 300, 100

// seedStore makes a store in dir holding every kind of file a real one has:
// rows flushed into table files with their flush marks recorded, rows only
// in the write-ahead log, closed cleanly.
func seedStore(t *testing.T, dir string, opts func(pebble.Options) pebble.Options) {
	t.Helper()
	db, err := pebble.Open(opts(pebble.Options{Dir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := db.Table(t.Context(), "Rows")
	mark := insertFlushed(t, db, tbl, dir, 0, 100, 0)
	insertFlushed(t, db, tbl, dir, 100, seededRows-seededInLog, mark)
	insertRows(t, tbl, seededRows-seededInLog, seededRows)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func insertRows(t *testing.T, tbl store.Table, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := tbl.Insert(t.Context(), store.Entity{PartitionKey: "p", RowKey: fmt.Sprintf("%04d", i),
			Properties: store.Properties{"Blob": strings.Repeat("x", 300)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// requireEveryRow fails unless the store in dir opens and holds every row
// seedStore acknowledged, and opens again after that: what the first open
// recorded must hold too.
func requireEveryRow(t *testing.T, dir string) {
	t.Helper()
	for range 2 {
		db, err := pebble.Open(pebble.Options{Dir: dir})
		if err != nil {
			t.Fatalf("open: %v, want the store with every row", err)
		}
		missing := missingRows(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if missing > 0 {
			t.Fatalf("the store opened without %d of its %d acknowledged rows", missing, seededRows)
		}
	}
}

// missingRows counts the rows of seedStore that db does not hold.
func missingRows(t *testing.T, db *pebble.DB) int {
	t.Helper()
	tbl, _ := db.Table(t.Context(), "Rows")
	missing := 0
	for i := range seededRows {
		if _, err := tbl.Get(t.Context(), "p", fmt.Sprintf("%04d", i)); err != nil {
			if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
				t.Fatal(err)
			}
			missing++
		}
	}
	return missing
}

// requireDamaged fails unless err is the one damaged-directory error
// naming dir.
func requireDamaged(t *testing.T, err error, dir string) {
	t.Helper()
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "the data directory "+dir+" is damaged: ") ||
		!strings.HasSuffix(err.Error(), "; restore it from a backup, or move it aside to start empty") {
		t.Fatalf("open: %v, want the damaged-directory error naming %s", err, dir)
	}
}

// storeFiles lists the files of the store in dir, relative to it.
func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files = append(files, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// copyStore copies the store in from into a new directory.
func copyStore(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	for _, name := range storeFiles(t, from) {
		if err := os.MkdirAll(filepath.Join(to, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		src, err := os.Open(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(dst, src)
		src.Close()
		if err = errors.Join(err, dst.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// fileKind names the kind of a store file by its name; newestLog is the
// name of the store's newest log.
func fileKind(name, newestLog string) string {
	base := filepath.Base(name)
	switch {
	case name == newestLog:
		return "newest log"
	case strings.HasSuffix(base, ".log"):
		return "older log"
	case strings.HasSuffix(base, ".sst"):
		return "table"
	case strings.HasSuffix(base, ".blob"):
		return "blob"
	case strings.HasPrefix(base, "MANIFEST-"):
		return "MANIFEST"
	case strings.HasPrefix(base, "OPTIONS-"):
		return "OPTIONS"
	case strings.HasPrefix(base, "marker.manifest."):
		return "manifest marker"
	case strings.HasPrefix(base, "marker.format-version."):
		return "format marker"
	}
	return base
}

// lossOf is what removing or truncating a file of each kind must do:
// "refuse" (the file holds acknowledged rows, or the list of those that
// do), "opens" with every row (the file is optional), or "either" of the
// two. A kind not listed fails the test, so a new kind of file is thought
// about.
var lossOf = map[string]struct{ deleted, truncated string }{
	"newest log": {"refuse", "refuse"},
	// The seeded store's older logs are flushed, kept by the engine for
	// reuse.
	"older log":       {"opens", "opens"},
	"table":           {"refuse", "refuse"},
	"MANIFEST":        {"refuse", "refuse"},
	"manifest marker": {"refuse", "opens"},
	// The markers hold nothing but their names: an empty one is as good as
	// a whole one.
	"format marker": {"refuse", "opens"},
	// OPTIONS guards against opening with incompatible options; the engine
	// writes a new one at every open.
	"OPTIONS": {"opens", "either"},
	// The store's own records: without them the checks check nothing; cut
	// short they still name a mark or a log, or are refused as damaged.
	pebble.MarkFileName: {"opens", "either"},
	pebble.WALFileName:  {"opens", "either"},
	"LOCK":              {"opens", "opens"},
}

// TestEveryFileOfTheStoreIsNeededOrOptional removes, and then truncates,
// each file of a real store in turn (table files, their MANIFEST and its
// marker, the log holding the rows not yet flushed, OPTIONS, the store's
// own records, the lock): each case opens with every acknowledged row or is
// refused as damaged, never opens short of rows.
func TestEveryFileOfTheStoreIsNeededOrOptional(t *testing.T) {
	seeded := t.TempDir()
	seedStore(t, seeded, pebble.WithoutCompactions)
	newestLog := newestLogOf(t, seeded)
	kinds := map[string]bool{}
	for _, name := range storeFiles(t, seeded) {
		kind := fileKind(name, newestLog)
		kinds[kind] = true
		want, ok := lossOf[kind]
		if !ok {
			t.Errorf("the store holds %s, a kind of file this test does not know", name)
			continue
		}
		for _, tc := range []struct {
			how, want string
			damage    func(path string) error
		}{
			{"deleted", want.deleted, os.Remove},
			{"truncated", want.truncated, func(path string) error {
				info, err := os.Stat(path)
				if err != nil {
					return err
				}
				return os.Truncate(path, info.Size()/2)
			}},
		} {
			t.Run(tc.how+" "+name, func(t *testing.T) {
				dir := copyStore(t, seeded)
				if err := tc.damage(filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
				if tc.want == "opens" {
					requireEveryRow(t, dir)
					return
				}
				db, err := pebble.Open(pebble.Options{Dir: dir})
				if err == nil && tc.want == "either" {
					missing := missingRows(t, db)
					db.Close()
					if missing > 0 {
						t.Fatalf("the store opened without %d of its %d acknowledged rows", missing, seededRows)
					}
					return
				}
				if err == nil {
					missing := missingRows(t, db)
					db.Close()
					t.Fatalf("the store opened (without %d of its rows), want it refused as damaged", missing)
				}
				requireDamaged(t, err, dir)
			})
		}
	}
	for _, kind := range []string{"newest log", "table", "MANIFEST", "manifest marker", "OPTIONS", pebble.MarkFileName, pebble.WALFileName} {
		if !kinds[kind] {
			t.Errorf("the seeded store holds no %s file: the test checks less than it says", kind)
		}
	}
}

// TestNewStoreOnlyInEmptyDirectory: a store is created in a missing or
// empty directory (or one holding only what a failed start or a volume's
// root leaves), and a directory holding anything else is refused, not
// initialised over.
func TestNewStoreOnlyInEmptyDirectory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
		refuse  bool
	}{
		{"missing", func(t *testing.T, dir string) { os.Remove(dir) }, false},
		{"empty", func(*testing.T, string) {}, false},
		{"failed start", func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, "LOCK"), "")
			if err := os.Mkdir(filepath.Join(dir, pebble.WALDirName), 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"volume root", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "lost+found"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"other files", func(t *testing.T, dir string) { mustWrite(t, filepath.Join(dir, "notes.txt"), "x") }, true},
		{"a log without a store", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, pebble.WALDirName), 0o755); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(dir, pebble.WALDirName, "000002.log"), "")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, dir)
			db, err := pebble.Open(pebble.Options{Dir: dir})
			if tc.refuse {
				if err == nil {
					db.Close()
				}
				requireDamaged(t, err, dir)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStoreWithoutManifestMarkerIsNotInitialised: the reported case. The
// MANIFEST marker and the flush mark record deleted, Pebble alone would
// start a new store there and delete every table file as obsolete; the
// store refuses, and leaves the files as they were.
func TestStoreWithoutManifestMarkerIsNotInitialised(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir, func(o pebble.Options) pebble.Options { return o })
	for _, name := range storeFiles(t, dir) {
		if k := fileKind(name, ""); k == "manifest marker" || k == pebble.MarkFileName {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := storeFiles(t, dir)
	_, err := pebble.Open(pebble.Options{Dir: dir})
	requireDamaged(t, err, dir)
	if !strings.Contains(err.Error(), "no store") {
		t.Errorf("the message does not say the directory holds no store: %v", err)
	}
	if after := storeFiles(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("the refused open changed the directory: %v, then %v", before, after)
	}
}

// newestLogOf is the name, relative to dir, of the newest log in dir's log
// directory.
func newestLogOf(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, pebble.WALDirName, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no log in %s: %v", filepath.Join(dir, pebble.WALDirName), err)
	}
	slices.Sort(logs)
	rel, err := filepath.Rel(dir, logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
