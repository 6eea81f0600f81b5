package pebble_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store/pebble"
)

// crashPoints is a filesystem that keeps a copy of itself, as a power loss
// would leave it (only what was synced), before each change to its names:
// every instant at which a crash could cut an open short.
type crashPoints struct {
	*vfs.MemFS
	mu     sync.Mutex
	copies []*vfs.MemFS
}

func (c *crashPoints) crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.copies = append(c.copies, c.CrashClone(vfs.CrashCloneCfg{}))
}

func (c *crashPoints) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	c.crash()
	return c.MemFS.Create(name, cat)
}

func (c *crashPoints) Link(oldname, newname string) error {
	c.crash()
	return c.MemFS.Link(oldname, newname)
}

func (c *crashPoints) Remove(name string) error {
	c.crash()
	return c.MemFS.Remove(name)
}

func (c *crashPoints) RemoveAll(name string) error {
	c.crash()
	return c.MemFS.RemoveAll(name)
}

func (c *crashPoints) Rename(oldname, newname string) error {
	c.crash()
	return c.MemFS.Rename(oldname, newname)
}

func (c *crashPoints) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	c.crash()
	return c.MemFS.ReuseForWrite(oldname, newname, cat)
}

func (c *crashPoints) MkdirAll(dir string, perm os.FileMode) error {
	c.crash()
	return c.MemFS.MkdirAll(dir, perm)
}

// seedMem writes rows [0, n) into the store in "db" on fs, flushing the
// first half into a table file; the rest are only in the log.
func seedMem(t *testing.T, opts pebble.Options, n int) {
	t.Helper()
	db, err := pebble.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := db.Table(t.Context(), "Rows")
	insertRows(t, tbl, 0, n/2)
	if err := pebble.Flush(db); err != nil {
		t.Fatal(err)
	}
	insertRows(t, tbl, n/2, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// missingOf counts the rows [0, n) that the store in "db" on fs lacks.
func missingOf(t *testing.T, fs vfs.FS, n int) int {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer db.Close()
	tbl, _ := db.Table(t.Context(), "Rows")
	missing := 0
	for i := range n {
		if _, err := tbl.Get(t.Context(), "p", fmt.Sprintf("%04d", i)); err != nil {
			missing++
		}
	}
	return missing
}

// logsIn lists the log files in dir on fs.
func logsIn(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(name string) bool { return !strings.HasSuffix(name, ".log") })
}

// TestLogBesideTablesMovesToItsDirectory opens a store written by a build
// that kept the log beside the tables: every row is there, the old logs go
// and the new log is in the log's own directory. A crash at any instant of
// that first open (a copy taken before each file is made, renamed or
// removed) leaves a store that opens with every row.
func TestLogBesideTablesMovesToItsDirectory(t *testing.T) {
	const rows = 200
	fs := &crashPoints{MemFS: vfs.NewCrashableMem()}
	seedMem(t, pebble.LogBesideTables(pebble.Options{Dir: "db", FS: fs.MemFS}), rows)
	if logs := logsIn(t, fs, "db"); len(logs) == 0 {
		t.Fatal("the old layout left no log beside the tables: the test moves nothing")
	}
	if missing := missingOf(t, fs, rows); missing > 0 {
		t.Fatalf("the first open in the new layout lacks %d of %d rows", missing, rows)
	}
	if logs := logsIn(t, fs, "db"); len(logs) > 0 {
		t.Errorf("logs %v are still beside the tables", logs)
	}
	if logs := logsIn(t, fs, fs.PathJoin("db", pebble.WALDirName)); len(logs) == 0 {
		t.Errorf("no log in %s", pebble.WALDirName)
	}
	if len(fs.copies) < 10 {
		t.Fatalf("only %d crash points", len(fs.copies))
	}
	for i, crashed := range fs.copies {
		if missing := missingOf(t, crashed, rows); missing > 0 {
			t.Fatalf("crash point %d of %d: the store lacks %d of %d rows", i, len(fs.copies), missing, rows)
		}
	}
}

// TestMissingNewestLogAfterCrashRefusesToOpen deletes the newest log of a
// store as a power loss left it, right after writes were acknowledged: the
// engine alone would open without them; the store refuses. Cutting that log
// short instead cannot be told from the crash itself.
func TestMissingNewestLogAfterCrashRefusesToOpen(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := db.Table(t.Context(), "Rows")
	insertRows(t, tbl, 0, 50)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	walDir := crashed.PathJoin("db", pebble.WALDirName)
	logs := logsIn(t, crashed, walDir)
	if len(logs) == 0 {
		t.Fatal("no log after the crash")
	}
	slices.Sort(logs)
	if err := crashed.Remove(crashed.PathJoin(walDir, logs[len(logs)-1])); err != nil {
		t.Fatal(err)
	}
	_, err = pebble.Open(pebble.Options{Dir: "db", FS: crashed})
	requireDamaged(t, err, "db")
	if !strings.Contains(err.Error(), logs[len(logs)-1]) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("the message does not name the missing log %s: %v", logs[len(logs)-1], err)
	}
}

// TestCheckpointKeepsItsLogBesideTables: a checkpoint of the store holds
// the log it copies beside its tables, where a backup (a flat list of
// files) takes it from, and the store opened on the checkpoint reads it.
func TestCheckpointKeepsItsLogBesideTables(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(pebble.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tbl, _ := db.Table(t.Context(), "Rows")
	insertRows(t, tbl, 0, 10)
	checkpoint := dir + "-checkpoint"
	if err := db.Checkpoint(checkpoint); err != nil {
		t.Fatal(err)
	}
	if logs := logsIn(t, vfs.Default, checkpoint); len(logs) == 0 {
		t.Fatalf("the checkpoint holds no log beside its tables")
	}
	entries, err := os.ReadDir(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			t.Errorf("the checkpoint holds %s, not a regular file", e.Name())
		}
	}
	copied, err := pebble.Open(pebble.Options{Dir: checkpoint})
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	rows, _ := copied.Table(t.Context(), "Rows")
	if _, err := rows.Get(t.Context(), "p", "0009"); err != nil {
		t.Fatalf("a row only in the log at the checkpoint: %v", err)
	}
}
