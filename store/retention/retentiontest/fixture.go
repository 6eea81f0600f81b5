package retentiontest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// Capture times of the fixture: four minutes of images around a cutoff
// inside the third minute.
var (
	base   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cutoff = base.Add(2*time.Minute + 30*time.Second)
)

// Fixture is a store with images of every kind and an engine over it.
type Fixture struct {
	// Base is the store itself; Backend is what the engine sees, Base or a
	// wrapper of it.
	Base    store.Backend
	Backend store.Backend
	// Queue is the queue design's queue; nil for the table queue in Base.
	Queue queue.Queue
	Repos []*images.Repository
	// Shards is the image repositories' IndexShards.
	Shards int
	// LastCreate is when Seed last wrote, for Settle.
	LastCreate time.Time
	// CreateTimeout, if set, replaces testCreateTimeout for the engine's
	// repositories.
	CreateTimeout time.Duration
	Engine        *retention.Engine
	Opts          Options
	// FS is the embedded store's filesystem, which a crash clones.
	FS *vfs.MemFS
	// Clock is the embedded store's clock (and the engine's, unless the
	// test gives its own); nil on Azure, whose clock is Azurite's.
	Clock *Clock
	// Stop stops the engine that Run started.
	Stop func()
	// Reopen opens a fixture on the store as a restarted process finds it:
	// for the embedded store, the filesystem crashed holds what was synced.
	Reopen func(t *testing.T, crashed *vfs.MemFS) *Fixture
	// AzureEngine runs the Azure backend's engine (queue, tasks, janitor) on
	// the embedded store, hiding its transactions and purges, so that
	// tests step that engine without Azurite.
	AzureEngine bool
	// Hooks are the queue driver's, for a test to stop or watch its work;
	// they outlive a reopened engine.
	Hooks *queue.Hooks
	// Harness is the driver and backend the fixture was opened with.
	Harness Harness
	// writeTime is how long a write of a store that StartCrashing kills
	// takes: virtual time in a bubble, none outside one.
	writeTime time.Duration
}

// Options are an engine's and, for the queue design, its driver's.
type Options struct {
	retention.Options
	QueueOptions
}

// QueueOptions are the queue design's options, by a name that does not
// clash with retention.Options as a field of Options.
type QueueOptions = queue.Options

// quickOptions make redeliveries and polls fast enough for tests.
func quickOptions() Options {
	return Options{
		Options: retention.Options{
			Logger:       slog.New(slog.DiscardHandler),
			PollInterval: 5 * time.Millisecond,
			// One identity across restarts, as the embedded daemon has: a
			// restarted engine resumes its own jobs at once.
			ReplicaID:     "embedded",
			LeaseDuration: time.Second,
		},
		QueueOptions: queue.Options{GroupSize: 2, VisibilityTimeout: 50 * time.Millisecond, MaxAttempts: 3},
	}
}

// Clock is the wall clock plus a skew that only grows: settle advances
// it instead of sleeping, so rows age in virtual time while everything else
// (create bounds, leases, polls) keeps running on real time.
type Clock struct{ skew atomic.Int64 }

// Now is the wall clock plus the skew.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

func (c *Clock) advance(d time.Duration) { c.skew.Add(int64(d)) }

// azurePoll is the least poll interval of an engine, and of a test waiting
// on it, on Azurite.
const azurePoll = 50 * time.Millisecond

// OpenEngine opens repositories and an engine on backend. A hooked
// embedded store keeps its transactions and its purges, each hooked as one
// write, unless the hooks hide its fast paths (plain): then it runs the
// engine of the Azure backend, which tests can step on it without Azurite.
func (f *Fixture) OpenEngine(t *testing.T, backend store.Backend) {
	t.Helper()
	if _, ok := backend.(store.Purger); ok && f.AzureEngine {
		backend = &HookedBackend{Backend: backend, Plain: true}
	}
	if h, ok := backend.(*HookedBackend); ok && f.AzureEngine {
		h.Plain = true
	}
	if h, ok := backend.(*HookedBackend); ok && !h.Plain {
		if _, ok := h.Backend.(store.Purger); ok {
			backend = purgingBackend{transactingBackend{h}}
		}
	}
	if h, ok := backend.(transactingBackend); ok && !h.Plain && !f.AzureEngine {
		if _, ok := h.Backend.(store.Purger); ok {
			backend = purgingBackend{h}
		}
	}
	f.Backend, f.Repos = backend, nil
	for _, kind := range images.Kinds {
		opts := imageOptions(kind, f.Shards)
		if f.CreateTimeout > 0 {
			opts.CreateTimeout = f.CreateTimeout
		}
		r, err := images.Open(t.Context(), backend, opts)
		if err != nil {
			t.Fatal(err)
		}
		f.Repos = append(f.Repos, r)
	}
	opts := f.Opts
	if opts.Now == nil && f.Clock != nil {
		opts.Now = f.Clock.Now
	}
	opts.Backend, opts.Repositories, opts.Queue = backend, f.Repos, f.Queue
	if f.Hooks == nil {
		f.Hooks = &queue.Hooks{}
	}
	opts.Driver = f.Harness.Driver(opts.QueueOptions, f.Hooks)
	e, err := retention.Open(t.Context(), opts.Options)
	if err != nil {
		t.Fatal(err)
	}
	f.Engine = e
}

// Repo is the engine's repository of kind.
func (f *Fixture) Repo(kind images.Kind) *images.Repository { return f.Repos[kind-1] }

// QueueDesign reports whether the fixture's engine is the queue design
// (Azure's engine, on Azurite or on the embedded store).
func (f *Fixture) QueueDesign() bool { return f.AzureEngine || f.Clock == nil }

// Bounds of the creates in these tests, on backends without transactions:
// short, so that a test waits little for its rows to settle (see settle),
// yet far above a create's time on Azurite.
const (
	testCreateTimeout = time.Second
	testLandingMargin = time.Millisecond
	testIndexLag      = testCreateTimeout + testLandingMargin
)

func imageOptions(kind images.Kind, shards int) images.Options {
	return images.Options{Kind: kind, IndexShards: shards, CreateTimeout: testCreateTimeout, LandingMargin: testLandingMargin}
}

// Settle waits until the rows seed wrote are older than the index lag: a
// purge's janitor leaves younger index rows whose primary row is missing to
// the next purge, since without a transaction it might still land. On the
// embedded store the wait is virtual (the store's clock advances); on
// Azure, whose timestamps are Azurite's, it is a real sleep. It waits a
// millisecond past the lag: the janitor keeps a row exactly as old as the
// lag, and in a synctest bubble no time passes between the seed and the
// purge.
func (f *Fixture) Settle() {
	wait := f.LastCreate.Add(testIndexLag + time.Millisecond).Sub(f.Now())
	if f.Clock != nil {
		f.Clock.advance(max(wait, 0))
		return
	}
	time.Sleep(wait)
}

// Now is the time on the store's clock, for lastCreate.
func (f *Fixture) Now() time.Time {
	if f.Clock != nil {
		return f.Clock.Now()
	}
	return time.Now()
}

// Seeders are repositories on the engine's backend with the default create
// bound: seeding ends before any purge starts (settle waits for it), so its
// creates need not fit the engine's short one, which a loaded machine can
// exceed.
func (f *Fixture) Seeders(t *testing.T) []*images.Repository {
	t.Helper()
	var out []*images.Repository
	for _, kind := range images.Kinds {
		r, err := images.Open(t.Context(), f.Backend, images.Options{Kind: kind, IndexShards: f.Shards})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Seed creates, for each kind, an image per camera at every 20 seconds of
// the four fixture minutes, so that the cutoff's own minute holds images on
// both sides of the cutoff.
func (f *Fixture) Seed(t *testing.T, cameras int) {
	t.Helper()
	f.SeedKinds(t, cameras, images.Kinds)
}

// SeedKinds is seed for the given kinds only. It writes with BatchCreate,
// which stores each image as Create does, in a write per partition rather
// than two per image: on Azurite, which every Azure test of the package
// shares, seeding was much of the tests' requests.
func (f *Fixture) SeedKinds(t *testing.T, cameras int, kinds []images.Kind) {
	t.Helper()
	for _, r := range f.Seeders(t) {
		if !slices.Contains(kinds, r.Kind()) {
			continue
		}
		var imgs []images.Image
		for c := range cameras {
			for s := 0; s < 240; s += 20 {
				imgs = append(imgs, images.Image{CameraID: fmt.Sprintf("cam-%03d", c), CapturedAt: base.Add(time.Duration(s) * time.Second)})
			}
		}
		batchSeed(t, r, imgs)
	}
	f.LastCreate = f.Now()
	f.Settle()
}

// batchSeed creates imgs with BatchCreate and fails the test unless each is
// created anew.
func batchSeed(t *testing.T, r *images.Repository, imgs []images.Image) {
	t.Helper()
	for chunk := range slices.Chunk(imgs, images.MaxBatchCreate) {
		for _, res := range r.BatchCreate(t.Context(), chunk) {
			if res.Err != nil || res.Existed {
				t.Fatalf("seeding %s images: %+v", r.Kind(), res)
			}
		}
	}
}

// Run runs the engine until stop or the end of the test.
func (f *Fixture) Run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.Engine.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	f.Stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(f.Stop)
}

// patience bounds the tests' waits for what should happen in well under a
// second: generous, since a 2-core machine running every package's race
// tests at once has taken over 30 s for a purge of a few hundred rows on
// Azurite, and a wait that passes costs nothing.
const patience = 2 * time.Minute

// Await waits for the job to end and returns it.
func (f *Fixture) Await(t *testing.T, id string) *retention.Job {
	t.Helper()
	return f.AwaitChecking(t, id, nil)
}

// AwaitChecking is await that runs check (when not nil) on the job each
// time it is found still running, so a test fails at once on what shows it
// will never end.
func (f *Fixture) AwaitChecking(t *testing.T, id string, check func(*retention.Job)) *retention.Job {
	t.Helper()
	deadline := time.After(patience)
	for {
		changed := f.Engine.Changed()
		j, err := f.Engine.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Terminal() {
			return j
		}
		if check != nil {
			check(j)
		}
		select {
		case <-changed:
		case <-time.After(max(10*time.Millisecond, f.Opts.PollInterval)):
		case <-deadline:
			t.Fatalf("job %s still %s after %v: %+v", id, j.State, patience, j.Totals())
		}
	}
}

// StatsOnceEnded returns the engine's stats once they count ended jobs
// for which ended holds: a watcher polling the store may see a job's end
// a moment before the engine has counted it.
func (f *Fixture) StatsOnceEnded(t *testing.T, ended func(map[retention.State]int64) bool) retention.Stats {
	t.Helper()
	deadline := time.After(patience)
	for {
		changed := f.Engine.Changed()
		if st := f.Engine.Stats(); ended(st.Ended) {
			return st
		}
		select {
		case <-changed:
		case <-time.After(max(10*time.Millisecond, f.Opts.PollInterval)):
		case <-deadline:
			t.Fatalf("ended jobs %v after %v", f.Engine.Stats().Ended, patience)
		}
	}
}

// Purge starts req and waits for the job to end.
func (f *Fixture) Purge(t *testing.T, req retention.StartRequest) *retention.Job {
	t.Helper()
	j, err := f.Engine.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return f.Await(t, j.ID)
}

// rows reads every row of a table.
func rows(t *testing.T, tbl store.Table) []store.Entity {
	t.Helper()
	var out []store.Entity
	s := store.Scan{}
	for {
		page, err := tbl.Scan(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Entities...)
		if page.Next == nil {
			return out
		}
		s.Resume = page.Next
	}
}

// captured is when the image behind a primary or index row was captured.
func captured(t *testing.T, e store.Entity) time.Time {
	t.Helper()
	rk := e.RowKey
	if v, ok := e.Properties[images.PropMetadataRowKey].(string); ok {
		rk = v
	}
	c, err := store.TimeFromInvertedTicksRowKey(rk)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Census counts the rows of a kind's tables captured before and from a boundary.
type Census struct{ PrimaryOld, PrimaryNew, IndexOld, IndexNew int64 }

// Census counts the rows of kind captured before and from boundary.
func (f *Fixture) Census(t *testing.T, kind images.Kind, boundary time.Time) Census {
	t.Helper()
	var c Census
	primary, index := f.Repo(kind).Tables()
	for _, e := range rows(t, primary) {
		if captured(t, e).Before(boundary) {
			c.PrimaryOld++
		} else {
			c.PrimaryNew++
		}
	}
	for _, e := range rows(t, index) {
		if captured(t, e).Before(boundary) {
			c.IndexOld++
		} else {
			c.IndexNew++
		}
	}
	return c
}
