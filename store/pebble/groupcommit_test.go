package pebble_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// slowWALFS counts the syncs of write-ahead-log files and makes each take a
// while, as a disk's does, so that commits arriving meanwhile can share it.
type slowWALFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (fs *slowWALFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &slowWAL{File: f, fs: fs}, nil
}

func (fs *slowWALFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *slowWALFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs *slowWALFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

type slowWAL struct {
	vfs.File
	fs *slowWALFS
}

func (f *slowWAL) sync() {
	f.fs.syncs.Add(1)
	time.Sleep(2 * time.Millisecond)
}

func (f *slowWAL) Sync() error { f.sync(); return f.File.Sync() }

func (f *slowWAL) SyncData() error { f.sync(); return f.File.SyncData() }

func (f *slowWAL) SyncTo(length int64) (bool, error) { f.sync(); return f.File.SyncTo(length) }

// TestConcurrentWritesShareSyncs: every acknowledged write is synced, but
// writes that arrive while a sync runs share the next one (group commit),
// so many concurrent inserts cost far fewer syncs than inserts. A store
// that synced each write alone, or serialised writes around their sync,
// would make one sync per insert.
func TestConcurrentWritesShareSyncs(t *testing.T) {
	fs := &slowWALFS{FS: vfs.NewMem()}
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tbl, err := db.Table(t.Context(), "Things")
	if err != nil {
		t.Fatal(err)
	}
	const writers = 64
	before := fs.syncs.Load()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			if _, err := tbl.Insert(t.Context(), store.Entity{PartitionKey: fmt.Sprintf("cam-%d", i), RowKey: "r"}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	syncs := fs.syncs.Load() - before
	t.Logf("%d inserts, %d syncs", writers, syncs)
	if syncs == 0 || syncs > writers/2 {
		t.Fatalf("%d concurrent inserts took %d WAL syncs; want them to share syncs (at most %d)", writers, syncs, writers/2)
	}
}
