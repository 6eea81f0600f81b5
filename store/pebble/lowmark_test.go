package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
	return openLowMarkStoreWith(t, fs, pebble.Options{Dir: "db", FS: fs})
}

// openLowMarkStoreWith opens the store with opts, whose FS is fs.
func openLowMarkStoreWith(t *testing.T, fs *vfs.MemFS, opts pebble.Options) *lowMarkStore {
	t.Helper()
	db, err := pebble.Open(opts)
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
	if err := db.Tally(t.Context(), tbl.Name()); err != nil {
		t.Fatal(err)
	}
	if err := db.AwaitTally(t.Context(), tbl.Name()); err != nil {
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

// TestLowMarksAreBounded: a store that meets more partitions than it may
// hold marks for keeps to its bound, and every create still answers as it
// would with its existence read, alone or racing duplicates: a dropped mark
// only costs the read.
func TestLowMarksAreBounded(t *testing.T) {
	const (
		bound   = 2 * pebble.LowMarkShards
		cameras = 1000
	)
	ctx := t.Context()
	fs := vfs.NewMem()
	s := openLowMarkStoreWith(t, fs, pebble.WithLowMarks(pebble.Options{Dir: "db", FS: fs}, bound))
	camera := func(c int) string { return fmt.Sprintf("cam-%04d", c) }
	requireHeld := func(when string) {
		t.Helper()
		if held := pebble.LowMarksHeld(s.db); held > bound {
			t.Fatalf("%s: %d low marks held, want at most %d", when, held, bound)
		}
	}
	for c := range cameras {
		if err := s.insert(ctx, camera(c), 1, c); err != nil {
			t.Fatal(err)
		}
	}
	requireHeld(fmt.Sprintf("after creates in %d partitions", cameras))
	for c := range cameras {
		if err := s.insert(ctx, camera(c), 1, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Fatalf("%s's image again, its mark dropped or not: %v, want ErrAlreadyExists", camera(c), err)
		}
		if err := s.insert(ctx, camera(c), 2, c); err != nil {
			t.Fatalf("%s's next image: %v", camera(c), err)
		}
		if err := s.insert(ctx, camera(c), 2, -1); !errors.Is(err, store.ErrAlreadyExists) {
			t.Fatalf("%s's next image again: %v, want ErrAlreadyExists", camera(c), err)
		}
	}
	requireHeld("after the duplicates")
	for c := range cameras {
		for _, m := range []int{1, 2} {
			if got := s.value(t, camera(c), m); got != int32(c) {
				t.Fatalf("%s minute %d holds %d, want %d", camera(c), m, got, c)
			}
		}
	}

	// Writers race to create the same new image of each of many cameras,
	// each in its own order, so that marks are dropped while others read
	// and lower them: each image is created once.
	const writers, racing = 8, 300
	for round := range 5 {
		minute := 10 + round
		wins := make([]atomic.Int32, racing)
		var created sync.WaitGroup
		for w := range writers {
			created.Go(func() {
				for _, c := range rand.New(rand.NewPCG(uint64(round), uint64(w))).Perm(racing) {
					err := s.insert(ctx, camera(c), minute, w)
					switch {
					case err == nil:
						wins[c].Add(1)
					case !errors.Is(err, store.ErrAlreadyExists):
						t.Error(err)
					}
				}
			})
		}
		created.Wait()
		for c := range racing {
			if n := wins[c].Load(); n != 1 {
				t.Fatalf("round %d: %s's image created %d times, want once", round, camera(c), n)
			}
		}
	}
	requireHeld("after the races")
}
