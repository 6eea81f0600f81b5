package embedded_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// TestTheOutboxGivesOutOnlyRecordsOnDisk: the store makes a section's
// batch visible before the sync of its log ends, and the blob deleter acts
// on what it reads at once. A read that finds the section's records while
// its sync waits (a crash would take them back) waits for it; once it
// returns, the read gives them out. In a synctest bubble, so that "waits"
// is every goroutine blocked, not a time.
func TestTheOutboxGivesOutOnlyRecordsOnDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &syncGate{FS: vfs.NewMem(), blocked: make(chan struct{}), release: make(chan struct{})}
		log := slog.New(slog.DiscardHandler)
		db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		p := &gatingPurger{DB: db, gate: fs}
		repo, err := images.Open(t.Context(), p, images.Options{Kind: images.Single})
		if err != nil {
			t.Fatal(err)
		}
		e, err := retention.Open(t.Context(), retention.Options{Backend: p, Repositories: []*images.Repository{repo},
			Driver: embedded.New, Logger: log, Outbox: true, ReplicaID: "embedded"})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		imgs := pacedImagesOf(now)
		for _, res := range repo.BatchCreate(t.Context(), imgs) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		// The images out of the memtable, so that the sync the gate holds is
		// the section's commit, not the switch to a new memtable and log
		// that a commit into a full one makes first (Pebble's first
		// memtables are small): the section's records would then not be
		// visible while it waits.
		if err := db.Compact(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan struct{})
		go func() { _ = e.Run(ctx); close(ran) }()
		defer func() { cancel(); <-ran }()
		j, err := e.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: now.AddDate(0, 0, -7)})
		if err != nil {
			t.Fatal(err)
		}

		<-fs.blocked // the section's batch is staged and committing
		outbox, err := db.Table(t.Context(), retention.DefaultOutboxTable)
		if err != nil {
			t.Fatal(err)
		}
		for deadline, visible := time.Now().Add(time.Second), false; !visible; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) { // in the bubble's time: every other goroutine waits
				close(fs.release)
				t.Fatal("the section's records never became visible while a log sync waited: the gate holds another sync than the section's")
			}
			page, err := outbox.Query(t.Context(), store.Query{PartitionKey: "d", Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			visible = len(page.Entities) > 0
		}
		read := make(chan int, 1)
		go func() {
			got, err := e.DeletedImages(t.Context(), "", 1000)
			if err != nil {
				t.Error(err)
			}
			read <- len(got)
		}()
		synctest.Wait()
		select {
		case n := <-read:
			t.Errorf("while the section's sync waits: %d records given out, want the read to wait (not on disk)", n)
			read <- n
		default:
		}
		close(fs.release)
		if n := <-read; n == 0 {
			t.Error("once the section returned: no record read")
		}

		for !j.State.Terminal() {
			time.Sleep(time.Millisecond)
			if j, err = e.Get(t.Context(), j.ID); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := e.DeletedImages(t.Context(), "", 1000); err != nil || len(got) != len(imgs) {
			t.Errorf("after the purge: %d records, %v; want the %d deleted", len(got), err, len(imgs))
		}
	})
}

// gatingPurger arms its gate once its first section's batch is staged, so
// that the log sync that waits is that batch's commit.
type gatingPurger struct {
	*pebble.DB
	gate  *syncGate
	armed atomic.Bool
}

func (g *gatingPurger) Exclusive(ctx context.Context, through time.Time, stage func(context.Context, store.PurgeBatch) error) error {
	return g.DB.Exclusive(ctx, through, func(ctx context.Context, b store.PurgeBatch) error {
		err := stage(ctx, b)
		if err == nil && g.armed.CompareAndSwap(false, true) {
			g.gate.armed.Store(true)
		}
		return err
	})
}

// syncGate is a filesystem whose next sync of a write-ahead log, once
// armed, waits for the test: it says so on blocked and goes on at release.
type syncGate struct {
	vfs.FS
	armed            atomic.Bool
	blocked, release chan struct{}
}

func (g *syncGate) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return g.gated(name)(g.FS.Create(name, c))
}

func (g *syncGate) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return g.gated(name)(g.FS.ReuseForWrite(old, name, c))
}

// gated wraps a log file's syncs.
func (g *syncGate) gated(name string) func(vfs.File, error) (vfs.File, error) {
	return func(f vfs.File, err error) (vfs.File, error) {
		if err != nil || !strings.HasSuffix(name, ".log") {
			return f, err
		}
		return &gatedFile{File: f, gate: g}, nil
	}
}

func (g *syncGate) wait() {
	if g.armed.CompareAndSwap(true, false) {
		g.blocked <- struct{}{}
		<-g.release
	}
}

type gatedFile struct {
	vfs.File
	gate *syncGate
}

func (f *gatedFile) Sync() error {
	f.gate.wait()
	return f.File.Sync()
}

func (f *gatedFile) SyncData() error {
	f.gate.wait()
	return f.File.SyncData()
}

func (f *gatedFile) SyncTo(length int64) (bool, error) {
	f.gate.wait()
	return f.File.SyncTo(length)
}
