package embedded_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// budgetStore is a small store on disk (the budget measures Pebble's own
// accounting of its files) with single images, an engine over it, and a
// clock that a test steps: capture times follow it.
type budgetStore struct {
	db     *pebble.DB
	repo   *images.Repository
	engine *retention.Engine
	budget *embedded.Budgeter
	now    atomic.Int64 // UnixNano of the engine's clock
}

func openBudgetStore(t *testing.T) *budgetStore {
	t.Helper()
	ctx := t.Context()
	logger := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Logger: logger, MemTableSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := &budgetStore{db: db}
	s.now.Store(time.Now().UTC().Add(-30 * 24 * time.Hour).Truncate(time.Hour).UnixNano())
	if s.repo, err = images.Open(ctx, db, images.Options{Kind: images.Single}); err != nil {
		t.Fatal(err)
	}
	// The clock jumps a minute per round of creates: a lease of seconds
	// would run out under a purge that takes milliseconds.
	o := retention.Options{Backend: db, Repositories: []*images.Repository{s.repo}, Logger: logger, Driver: embedded.New,
		ReplicaID: "embedded", PollInterval: 5 * time.Millisecond, LeaseDuration: 48 * time.Hour,
		Now: func() time.Time { return time.Unix(0, s.now.Load()).UTC() }}
	if s.engine, err = retention.Open(ctx, o); err != nil {
		t.Fatal(err)
	}
	s.budget = embedded.NewBudgeter(s.engine, o.Repositories, logger)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.engine.Run(runCtx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *budgetStore) clock() time.Time { return time.Unix(0, s.now.Load()).UTC() }

// minutes creates an image of each camera at each of the clock's next n
// minutes, in one batch (one synced commit, not n), and moves the clock on
// past them; it returns their instants.
func (s *budgetStore) minutes(t *testing.T, cameras []string, n int) []time.Time {
	t.Helper()
	var imgs []images.Image
	var ats []time.Time
	for range n {
		at := s.clock()
		ats = append(ats, at)
		for _, c := range cameras {
			imgs = append(imgs, upload(c, at))
		}
		s.now.Add(int64(time.Minute))
	}
	for _, r := range s.repo.BatchCreate(t.Context(), imgs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return ats
}

// settle steps the budget until it rests: no purge of its running, its
// deletions counted, and the store measured under budget or blocked.
func (s *budgetStore) settle(t *testing.T, b embedded.Budget) embedded.BudgetState {
	t.Helper()
	var st embedded.BudgetState
	testwait.Until(t, time.Minute, func() error {
		var err error
		if st, err = s.budget.Once(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		if st.Job == "" && !st.Measured.IsZero() && (!st.Over || st.Blocked != "") {
			return nil
		}
		return fmt.Errorf("the budget is not at rest: %+v", st)
	})
	return st
}

// awaitBudgetJob waits for the budget's purge, if one runs, to end.
func (s *budgetStore) awaitBudgetJob(t *testing.T) {
	t.Helper()
	id := s.budget.BudgetState().Job
	if id == "" {
		return
	}
	testwait.Until(t, time.Minute, func() error {
		j, err := s.engine.Get(t.Context(), id)
		if err != nil || j.State.Terminal() {
			return err
		}
		return fmt.Errorf("the budget's purge %s is %s", id, j.State)
	})
}

// upload is an image as a camera would send it, so rows have a real size.
func upload(camera string, at time.Time) images.Image {
	return images.Image{CameraID: camera, CapturedAt: at, ContentType: "image/jpeg", SizeBytes: 350_000, Width: 1920, Height: 1080,
		BlobURI: fmt.Sprintf("https://images.example/%s/%d.jpg", camera, at.UnixNano())}
}

func cameraIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// TestBudgetKeepsTheStoreUnderItsBytes: under a steady load of creates, a
// storage budget stepped between them keeps the store's live data under
// its bytes by purging the oldest hours; every image younger than what it
// purged is kept, and so is every image of a held camera; the live data
// falls as the engine's accounting says, without a scan.
func TestBudgetKeepsTheStoreUnderItsBytes(t *testing.T) {
	s := openBudgetStore(t)
	cameras := cameraIDs("cam-", 10)
	if _, err := s.engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: "held-0"}); err != nil {
		t.Fatal(err)
	}
	writers := append(cameras, "held-0")
	b := embedded.Budget{MaxBytes: 256 << 10, Floor: time.Hour, Store: s.db}
	var created []time.Time // one per minute, for every camera
	peak, purges := uint64(0), 0
	var cutoff time.Time
	for range 12 * 6 {
		created = append(created, s.minutes(t, writers, 10)...)
		// A step every ten minutes of images, as RunBudget's ticker would
		// come; a purge it starts runs while the next creates go on, and
		// has ended by the next step, as a purge of an hour of images ends
		// well within a tick of a minute.
		s.awaitBudgetJob(t)
		st, err := s.budget.Once(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Measured.IsZero() {
			peak = max(peak, st.LiveBytes)
		}
		if st.Job != "" && st.Cutoff.After(cutoff) {
			cutoff, purges = st.Cutoff, purges+1
		}
	}
	st := s.settle(t, b)
	cutoff = store.MaxTime(cutoff, st.Cutoff)
	t.Logf("at rest: %+v; peak %d", st, peak)
	if st.Over || st.LiveBytes > b.MaxBytes {
		t.Errorf("at rest: %+v, want under %d bytes", st, b.MaxBytes)
	}
	// An hour of images is about a quarter of the budget, and a purge
	// takes one: a budget that purged more than it needs (a measure blind
	// to its own deletions) ends far below it.
	if st.LiveBytes < b.MaxBytes/2 {
		t.Errorf("at rest: %d live bytes, budget %d: purged more than the budget needs", st.LiveBytes, b.MaxBytes)
	}
	if purges < 3 || cutoff.IsZero() {
		t.Fatalf("%d purges for space, the last before %s: the load never passed the budget enough to test it", purges, cutoff)
	}
	// The steps come every ten minutes of load, so the live data may pass
	// the budget by what lands between a measure and its purge's end, and
	// by a memtable of unflushed (uncompressed) images.
	if peak > b.MaxBytes*5/4 {
		t.Errorf("live data peaked at %d bytes, budget %d", peak, b.MaxBytes)
	}
	for _, c := range cameras {
		kept := s.captured(t, c)
		for _, at := range created {
			if !at.Before(cutoff) && !kept[at] {
				t.Fatalf("%s lost its image of %s, younger than the budget's last cutoff %s", c, at, cutoff)
			}
		}
		if kept[created[0]] {
			t.Errorf("%s keeps its oldest image: nothing was purged", c)
		}
	}
	if kept := s.captured(t, "held-0"); len(kept) != len(created) {
		t.Errorf("held-0 keeps %d of its %d images: a hold is never purged for space", len(kept), len(created))
	}
}

// TestBudgetReportsWhatKeepsTheStoreOver: when the only images that could
// go are held, or younger than the floor, the budget purges nothing and
// says why.
func TestBudgetReportsWhatKeepsTheStoreOver(t *testing.T) {
	s := openBudgetStore(t)
	cameras := cameraIDs("cam-", 10)
	for range 6 * 6 {
		s.minutes(t, cameras, 10)
	}
	b := embedded.Budget{MaxBytes: 64 << 10, Floor: 24 * time.Hour, Store: s.db}
	if st := s.settle(t, b); !st.Over || st.Blocked != "floor" {
		t.Errorf("every image younger than the floor: %+v, want over, blocked by the floor", st)
	}
	for _, c := range cameras {
		if _, err := s.engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: c}); err != nil {
			t.Fatal(err)
		}
	}
	b.Floor = time.Hour
	if st := s.settle(t, b); !st.Over || st.Blocked != "held" {
		t.Errorf("every camera held: %+v, want over, blocked by holds", st)
	}
	for _, c := range cameras {
		if n := len(s.captured(t, c)); n != 6*60 {
			t.Errorf("%s keeps %d images, want all %d", c, n, 6*60)
		}
	}
}

// captured is the set of a camera's images' capture instants.
func (s *budgetStore) captured(t *testing.T, camera string) map[time.Time]bool {
	t.Helper()
	primary, _ := s.repo.Tables()
	out := map[time.Time]bool{}
	q := store.Query{PartitionKey: camera}
	for {
		page, err := primary.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entities {
			at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
			if err != nil {
				t.Fatal(err)
			}
			out[at] = true
		}
		if page.Next == nil {
			return out
		}
		q.Resume = page.Next
	}
}

// TestBudgetPurgesWhatTheStoreIsOverBy: a store twice its budget, its
// images spread evenly over twelve hours, is back under after one purge
// (two, if a measure right after it still lags its deletions), not one
// capture hour a purge; and keeps about half its images, not far fewer.
func TestBudgetPurgesWhatTheStoreIsOverBy(t *testing.T) {
	s := openBudgetStore(t)
	cameras := cameraIDs("cam-", 10)
	var created int
	for range 12 * 6 {
		created += len(s.minutes(t, cameras, 10)) * len(cameras)
	}
	// Compacted, the store measures what it holds, not what compactions
	// have yet to fold: the budget is half of that.
	if err := s.db.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	measured := s.settle(t, embedded.Budget{MaxBytes: 1 << 40, Floor: time.Hour, Store: s.db})
	b := embedded.Budget{MaxBytes: measured.LiveBytes / 2, Floor: time.Hour, Store: s.db}
	purges := 0
	testwait.Until(t, time.Minute, func() error {
		s.awaitBudgetJob(t)
		st, err := s.budget.Once(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		if st.Job != "" {
			purges++
		}
		if st.Job == "" && !st.Measured.IsZero() && !st.Over {
			return nil
		}
		return fmt.Errorf("the budget is not at rest: %+v", st)
	})
	if purges > 2 {
		t.Errorf("%d purges took a store twice its budget under it, want one", purges)
	}
	kept := 0
	for _, c := range cameras {
		kept += len(s.captured(t, c))
	}
	if kept < created*2/5 || kept > created*3/5 {
		t.Errorf("%d of %d images kept, want about half", kept, created)
	}
}
