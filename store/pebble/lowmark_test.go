package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// lowMarkStore is a store with one tallied table, as the image primary
// tables are, on a filesystem a test can crash.
type lowMarkStore struct {
	fs     *vfs.MemFS
	db     *pebble.DB
	tbl    store.Table
	closed bool
}

func openLowMarkStore(t *testing.T, fs *vfs.MemFS) *lowMarkStore {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	s := &lowMarkStore{fs: fs, db: db}
	t.Cleanup(func() {
		if !s.closed {
			db.Close()
		}
	})
	tbl, err := db.Table(t.Context(), "Single")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Tally(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	if err := db.AwaitTally(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	s.tbl = tbl
	return s
}

// reopen closes the store and opens it again on fs, for the rest of the
// test t.
func (s *lowMarkStore) reopen(t *testing.T, fs *vfs.MemFS) *lowMarkStore {
	t.Helper()
	s.closed = true
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	return openLowMarkStore(t, fs)
}

var lowMarkBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// insert creates camera's image of minute m (newer minutes have lower row
// keys) with value v.
func (s *lowMarkStore) insert(ctx context.Context, camera string, m, v int) error {
	_, err := s.tbl.Insert(ctx, store.Entity{PartitionKey: camera,
		RowKey: store.InvertedTicksRowKey(lowMarkBase.Add(time.Duration(m) * time.Minute)), Properties: store.Properties{"V": int32(v)}})
	return err
}

// value is the stored value of camera's image of minute m.
func (s *lowMarkStore) value(t *testing.T, camera string, m int) int32 {
	t.Helper()
	e, err := s.tbl.Get(t.Context(), camera, store.InvertedTicksRowKey(lowMarkBase.Add(time.Duration(m)*time.Minute)))
	if err != nil {
		t.Fatalf("%s minute %d: %v", camera, m, err)
	}
	return e.Properties["V"].(int32)
}

// TestInsertsBelowTheLowMarkSkipTheirRead: creates in capture order skip
// the existence read, and every create still inserts once and answers as
// it would with the read: in order, out of order, concurrent duplicates,
// after a restart and after a crash.
func TestInsertsBelowTheLowMarkSkipTheirRead(t *testing.T) {
	ctx := t.Context()
	parent := t // the store's reopenings outlive their subtests
	s := openLowMarkStore(t, vfs.NewCrashableMem())

	t.Run("in order", func(t *testing.T) {
		before := pebble.ReadsSkipped(s.db)
		for m := range 20 {
			if err := s.insert(ctx, "cam-a", m, m); err != nil {
				t.Fatal(err)
			}
		}
		if got := pebble.ReadsSkipped(s.db) - before; got != 20 {
			t.Errorf("%d of 20 in-order creates skipped their read, want all", got)
		}
		// The newest again: at the mark, not below it, so it is read.
		if err := s.insert(ctx, "cam-a", 19, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("the newest image again: %v, want ErrAlreadyExists", err)
		}
		if got := s.value(t, "cam-a", 19); got != 19 {
			t.Errorf("the newest image holds %d after a duplicate, want 19", got)
		}
	})

	t.Run("out of order", func(t *testing.T) {
		// An older minute that is free, then one that is taken.
		if err := s.insert(ctx, "cam-b", 10, 10); err != nil {
			t.Fatal(err)
		}
		before := pebble.ReadsSkipped(s.db)
		if err := s.insert(ctx, "cam-b", 5, 5); err != nil {
			t.Fatalf("an older free minute: %v", err)
		}
		if err := s.insert(ctx, "cam-b", 10, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("a taken minute: %v, want ErrAlreadyExists", err)
		}
		if got := pebble.ReadsSkipped(s.db) - before; got != 0 {
			t.Errorf("%d creates above the mark skipped their read", got)
		}
		if err := s.insert(ctx, "cam-b", 7, 7); err != nil {
			t.Fatalf("a free minute between two: %v", err)
		}
		if err := s.insert(ctx, "cam-b", 5, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("the older minute again: %v, want ErrAlreadyExists", err)
		}
		for _, m := range []int{5, 7, 10} {
			if got := s.value(t, "cam-b", m); got != int32(m) {
				t.Errorf("minute %d holds %d, want %d", m, got, m)
			}
		}
	})

	t.Run("concurrent duplicates", func(t *testing.T) {
		// Each round many writers create the same new newest image, first
		// touching a partition whose mark is not read yet, then one whose
		// mark they lower: one insert wins, the rest are refused.
		const writers = 16
		for round := range 30 {
			camera := fmt.Sprintf("cam-c%d", round%3)
			var created sync.WaitGroup
			var mu sync.Mutex
			wins, dups := 0, 0
			for w := range writers {
				created.Go(func() {
					err := s.insert(ctx, camera, 100+round, w)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						wins++
					case errors.Is(err, store.ErrAlreadyExists):
						dups++
					default:
						t.Error(err)
					}
				})
			}
			created.Wait()
			if wins != 1 || dups != writers-1 {
				t.Fatalf("round %d: %d inserts won and %d were refused, want 1 and %d", round, wins, dups, writers-1)
			}
		}
	})

	t.Run("after a restart", func(t *testing.T) {
		s = s.reopen(parent, s.fs)
		// The marks are read again from the store: the newest image of
		// each camera is still refused, a newer one still inserts.
		if err := s.insert(ctx, "cam-a", 19, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("the newest image after a restart: %v, want ErrAlreadyExists", err)
		}
		if err := s.insert(ctx, "cam-a", 20, 20); err != nil {
			t.Fatalf("a newer image after a restart: %v", err)
		}
		if err := s.insert(ctx, "cam-a", 20, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("that image again: %v, want ErrAlreadyExists", err)
		}
	})

	t.Run("a retry after a crash", func(t *testing.T) {
		if err := s.insert(ctx, "cam-d", 1, 1); err != nil {
			t.Fatal(err)
		}
		// The power fails after the acknowledgement; the client, which
		// never saw it, retries on the restarted store.
		s = s.reopen(parent, s.fs.CrashClone(vfs.CrashCloneCfg{}))
		if err := s.insert(ctx, "cam-d", 1, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("the retried create: %v, want ErrAlreadyExists", err)
		}
		if got := s.value(t, "cam-d", 1); got != 1 {
			t.Errorf("the image holds %d after the retry, want 1", got)
		}
		if err := s.insert(ctx, "cam-d", 2, 2); err != nil {
			t.Fatalf("the next image: %v", err)
		}
	})
}
