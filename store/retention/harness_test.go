package retention_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/azqueue"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// Capture times of the fixture: four minutes of images around a cutoff
// inside the third minute.
var (
	base   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cutoff = base.Add(2*time.Minute + 30*time.Second)
)

// fixture is a store with images of every kind and an engine over it.
type fixture struct {
	// base is the store itself; backend is what the engine sees, base or a
	// wrapper of it.
	base    store.Backend
	backend store.Backend
	// queue is the engine's queue; nil for the table queue in base.
	queue retention.Queue
	repos []*images.Repository
	// shards is the image repositories' IndexShards.
	shards int
	// lastCreate is when seed last wrote, for settle.
	lastCreate time.Time
	// createTimeout, if set, replaces testCreateTimeout for the engine's
	// repositories.
	createTimeout time.Duration
	engine        *retention.Engine
	opts          retention.Options
	// fs is the embedded store's filesystem, which a crash clones.
	fs *vfs.MemFS
	// clock is the embedded store's clock (and the engine's, unless the
	// test gives its own); nil on Azure, whose clock is Azurite's.
	clock *testClock
	// stop stops the engine that run started.
	stop func()
	// reopen opens a fixture on the store as a restarted process finds it:
	// for the embedded store, the filesystem crashed holds what was synced.
	reopen func(t *testing.T, crashed *vfs.MemFS) *fixture
	// azureEngine runs the Azure backend's engine (queue, tasks, janitor) on
	// the embedded store, hiding its transactions and purges, so that
	// tests step that engine without Azurite.
	azureEngine bool
	// hooks are the queue driver's, for a test to stop or watch its work;
	// they outlive a reopened engine.
	hooks *queue.Hooks
}

// storeCase is a backend the engine is tested on.
type storeCase struct {
	name string
	open func(t *testing.T, opts retention.Options) *fixture
}

// stores are the backends the engine is tested on, each with the driver
// that runs on it in the daemon; queueStores those the queue design
// (queue, tasks, leases, visibility, the janitor) is tested on: Azure, and
// the embedded store with the queue driver ("pebble-queue"). That mode
// serves no user; it stays because it is the cheaper way to test the queue
// driver: a scenario on Pebble in memory takes milliseconds where Azurite
// takes seconds, it crashes at any write by a copy of its files, and its
// waits run in a synctest bubble, where Azurite, a real process, cannot.
var (
	stores      = []storeCase{{"pebble", newFixture}, {"azure", newAzureFixture}}
	queueStores = []storeCase{{"pebble-queue", newQueueFixture}, {"azure", newAzureFixture}}
)

func forEachStore(t *testing.T, test func(t *testing.T, open func(t *testing.T, opts retention.Options) *fixture)) {
	forEachOf(t, stores, test)
}

func forEachQueueStore(t *testing.T, test func(t *testing.T, open func(t *testing.T, opts retention.Options) *fixture)) {
	forEachOf(t, queueStores, test)
}

// forEachQueueStoreInBubble is forEachQueueStore for tests whose subject
// is time (visibility timeouts, leases): the embedded variant runs in a
// synctest bubble, where its waits are virtual and cost no wall-clock
// time; Azurite is a real process, so the Azure variant waits for real.
func forEachQueueStoreInBubble(t *testing.T, test func(t *testing.T, open func(t *testing.T, opts retention.Options) *fixture)) {
	t.Run("pebble-queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			test(t, func(t *testing.T, opts retention.Options) *fixture { return newBubbleFixture(t, opts, true) })
		})
	})
	t.Run("azure", func(t *testing.T) { test(t, newAzureFixture) })
}

func forEachOf(t *testing.T, cases []storeCase, test func(t *testing.T, open func(t *testing.T, opts retention.Options) *fixture)) {
	for _, s := range cases {
		t.Run(s.name, func(t *testing.T) { test(t, s.open) })
	}
}

// quickOptions make redeliveries and polls fast enough for tests.
func quickOptions() retention.Options {
	return retention.Options{
		Logger:            slog.New(slog.DiscardHandler),
		GroupSize:         2,
		VisibilityTimeout: 50 * time.Millisecond,
		PollInterval:      5 * time.Millisecond,
		MaxAttempts:       3,
		// One identity across restarts, as the embedded daemon has: a
		// restarted engine resumes its own jobs at once.
		ReplicaID:     "embedded",
		LeaseDuration: time.Second,
	}
}

// newFixture opens the embedded store on a crashable in-memory filesystem.
func newFixture(t *testing.T, opts retention.Options) *fixture {
	t.Helper()
	return openPebbleFixture(t, opts, vfs.NewCrashableMem())
}

// testClock is the wall clock plus a skew that only grows: settle advances
// it instead of sleeping, so rows age in virtual time while everything else
// (create bounds, leases, polls) keeps running on real time.
type testClock struct{ skew atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

func (c *testClock) advance(d time.Duration) { c.skew.Add(int64(d)) }

// newQueueFixture is newFixture running the Azure backend's engine.
func newQueueFixture(t *testing.T, opts retention.Options) *fixture {
	t.Helper()
	return openPebbleFixtureAs(t, opts, vfs.NewCrashableMem(), true)
}

func openPebbleFixture(t *testing.T, opts retention.Options, fs *vfs.MemFS) *fixture {
	t.Helper()
	return openPebbleFixtureAs(t, opts, fs, false)
}

func openPebbleFixtureAs(t *testing.T, opts retention.Options, fs *vfs.MemFS, azureEngine bool) *fixture {
	t.Helper()
	return openPebbleFixtureOn(t, opts, fs, azureEngine, &testClock{})
}

// openPebbleFixtureOn opens the embedded store with clock, which a restarted
// process keeps: time does not go back across a crash.
func openPebbleFixtureOn(t *testing.T, opts retention.Options, fs *vfs.MemFS, azureEngine bool, clock *testClock) *fixture {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs, Logger: opts.Logger, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{fs: fs, base: db, opts: opts, azureEngine: azureEngine, clock: clock}
	f.reopen = func(t *testing.T, crashed *vfs.MemFS) *fixture {
		return openPebbleFixtureOn(t, opts, crashed, azureEngine, clock)
	}
	f.openEngine(t, db)
	return f
}

// newBubbleFixture is newFixture (with azureEngine, newQueueFixture) for a
// test inside a synctest bubble, where time is virtual and only moves while
// every goroutine of the test waits: the store's clock starts a month after
// base, since the bubble's own starts in 2000, before the images.
func newBubbleFixture(t *testing.T, opts retention.Options, azureEngine bool) *fixture {
	t.Helper()
	clock := &testClock{}
	clock.advance(base.AddDate(0, 1, 0).Sub(time.Now()))
	return openPebbleFixtureOn(t, opts, vfs.NewCrashableMem(), azureEngine, clock)
}

// azurePoll is the least poll interval of an engine, and of a test waiting
// on it, on Azurite.
const azurePoll = 50 * time.Millisecond

// newAzureFixture opens tables and a queue of the test's own on Azurite.
func newAzureFixture(t *testing.T, opts retention.Options) *fixture {
	t.Helper()
	conn := azurite.Require(t)
	var id [5]byte
	_, _ = rand.Read(id[:])
	name := hex.EncodeToString(id[:])
	backend, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: conn, TablePrefix: "t" + name, Logger: opts.Logger})
	if err != nil {
		t.Fatal(err)
	}
	q, err := azqueue.Open(t.Context(), azqueue.Options{ConnectionString: conn, Name: "purge-" + name})
	if err != nil {
		t.Fatal(err)
	}
	// Azure hides a message for whole seconds; a shorter timeout would only
	// make workers extend their tasks tens of times a second.
	opts.VisibilityTimeout = max(opts.VisibilityTimeout, time.Second)
	// A change this process makes wakes the engine's workers and waiters at
	// once; the poll only finds what the queue's visibility timeouts bring
	// back, a second apart. Polled every 5 ms, one engine's idle workers
	// asked Azurite, which every Azure test of the package shares, 800
	// times a second, and the tests running at once waited on it. (0 is
	// the default, longer still.)
	if opts.PollInterval > 0 {
		opts.PollInterval = max(opts.PollInterval, azurePoll)
	}
	f := &fixture{base: backend, queue: q, opts: opts}
	// Azure keeps every acknowledged write: a restarted process finds the
	// store as the crash left it.
	f.reopen = func(t *testing.T, _ *vfs.MemFS) *fixture {
		g := &fixture{base: backend, queue: q, opts: opts, reopen: f.reopen}
		g.openEngine(t, backend)
		return g
	}
	f.openEngine(t, backend)
	return f
}

// openEngine opens repositories and an engine on backend. A hooked
// embedded store keeps its transactions and its purges, each hooked as one
// write, unless the hooks hide its fast paths (plain): then it runs the
// engine of the Azure backend, which tests can step on it without Azurite.
func (f *fixture) openEngine(t *testing.T, backend store.Backend) {
	t.Helper()
	if _, ok := backend.(store.Purger); ok && f.azureEngine {
		backend = &hookedBackend{Backend: backend, plain: true}
	}
	if h, ok := backend.(*hookedBackend); ok && f.azureEngine {
		h.plain = true
	}
	if h, ok := backend.(*hookedBackend); ok && !h.plain {
		if _, ok := h.Backend.(store.Purger); ok {
			backend = purgingBackend{transactingBackend{h}}
		}
	}
	if h, ok := backend.(transactingBackend); ok && !h.plain && !f.azureEngine {
		if _, ok := h.Backend.(store.Purger); ok {
			backend = purgingBackend{h}
		}
	}
	f.backend, f.repos = backend, nil
	for _, kind := range images.Kinds {
		opts := imageOptions(kind, f.shards)
		if f.createTimeout > 0 {
			opts.CreateTimeout = f.createTimeout
		}
		r, err := images.Open(t.Context(), backend, opts)
		if err != nil {
			t.Fatal(err)
		}
		f.repos = append(f.repos, r)
	}
	opts := f.opts
	if opts.Now == nil && f.clock != nil {
		opts.Now = f.clock.now
	}
	opts.Backend, opts.Repositories, opts.Queue = backend, f.repos, f.queue
	if f.hooks == nil {
		f.hooks = &queue.Hooks{}
	}
	opts.Driver = queue.WithHooks(f.hooks)
	if _, ok := backend.(store.Purger); ok {
		opts.Driver = embedded.New
	}
	e, err := retention.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.engine = e
}

func (f *fixture) repo(kind images.Kind) *images.Repository { return f.repos[kind-1] }

// queueDesign reports whether the fixture's engine is the queue design
// (Azure's engine, on Azurite or on the embedded store).
func (f *fixture) queueDesign() bool { return f.azureEngine || f.clock == nil }

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

// settle waits until the rows seed wrote are older than the index lag: a
// purge's janitor leaves younger index rows whose primary row is missing to
// the next purge, since without a transaction it might still land. On the
// embedded store the wait is virtual (the store's clock advances); on
// Azure, whose timestamps are Azurite's, it is a real sleep.
func (f *fixture) settle() {
	wait := f.lastCreate.Add(testIndexLag).Sub(f.now())
	if f.clock != nil {
		f.clock.advance(max(wait, 0))
		return
	}
	time.Sleep(wait)
}

// now is the time on the store's clock, for lastCreate.
func (f *fixture) now() time.Time {
	if f.clock != nil {
		return f.clock.now()
	}
	return time.Now()
}

// seeders are repositories on the engine's backend with the default create
// bound: seeding ends before any purge starts (settle waits for it), so its
// creates need not fit the engine's short one, which a loaded machine can
// exceed.
func (f *fixture) seeders(t *testing.T) []*images.Repository {
	t.Helper()
	var out []*images.Repository
	for _, kind := range images.Kinds {
		r, err := images.Open(t.Context(), f.backend, images.Options{Kind: kind, IndexShards: f.shards})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// seed creates, for each kind, an image per camera at every 20 seconds of
// the four fixture minutes, so that the cutoff's own minute holds images on
// both sides of the cutoff.
func (f *fixture) seed(t *testing.T, cameras int) {
	t.Helper()
	f.seedKinds(t, cameras, images.Kinds)
}

// seedKinds is seed for the given kinds only. It writes with BatchCreate,
// which stores each image as Create does, in a write per partition rather
// than two per image: on Azurite, which every Azure test of the package
// shares, seeding was much of the tests' requests.
func (f *fixture) seedKinds(t *testing.T, cameras int, kinds []images.Kind) {
	t.Helper()
	for _, r := range f.seeders(t) {
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
	f.lastCreate = f.now()
	f.settle()
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

// run runs the engine until stop or the end of the test.
func (f *fixture) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.engine.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	f.stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(f.stop)
}

// patience bounds the tests' waits for what should happen in well under a
// second: generous, since a 2-core machine running every package's race
// tests at once has taken over 30 s for a purge of a few hundred rows on
// Azurite, and a wait that passes costs nothing.
const patience = 2 * time.Minute

// await waits for the job to end and returns it.
func (f *fixture) await(t *testing.T, id string) *retention.Job {
	t.Helper()
	return f.awaitChecking(t, id, nil)
}

// awaitChecking is await that runs check (when not nil) on the job each
// time it is found still running, so a test fails at once on what shows it
// will never end.
func (f *fixture) awaitChecking(t *testing.T, id string, check func(*retention.Job)) *retention.Job {
	t.Helper()
	deadline := time.After(patience)
	for {
		changed := f.engine.Changed()
		j, err := f.engine.Get(t.Context(), id)
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
		case <-time.After(max(10*time.Millisecond, f.opts.PollInterval)):
		case <-deadline:
			t.Fatalf("job %s still %s after %v: %+v", id, j.State, patience, j.Totals())
		}
	}
}

// statsOnceEnded returns the engine's stats once they count ended jobs
// for which ended holds: a watcher polling the store may see a job's end
// a moment before the engine has counted it.
func (f *fixture) statsOnceEnded(t *testing.T, ended func(map[retention.State]int64) bool) retention.Stats {
	t.Helper()
	deadline := time.After(patience)
	for {
		changed := f.engine.Changed()
		if st := f.engine.Stats(); ended(st.Ended) {
			return st
		}
		select {
		case <-changed:
		case <-time.After(max(10*time.Millisecond, f.opts.PollInterval)):
		case <-deadline:
			t.Fatalf("ended jobs %v after %v", f.engine.Stats().Ended, patience)
		}
	}
}

func (f *fixture) purge(t *testing.T, req retention.StartRequest) *retention.Job {
	t.Helper()
	j, err := f.engine.Start(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return f.await(t, j.ID)
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

// census counts the rows of a kind's tables captured before and from a boundary.
type census struct{ primaryOld, primaryNew, indexOld, indexNew int64 }

func (f *fixture) census(t *testing.T, kind images.Kind, boundary time.Time) census {
	t.Helper()
	var c census
	primary, index := f.repo(kind).Tables()
	for _, e := range rows(t, primary) {
		if captured(t, e).Before(boundary) {
			c.primaryOld++
		} else {
			c.primaryNew++
		}
	}
	for _, e := range rows(t, index) {
		if captured(t, e).Before(boundary) {
			c.indexOld++
		} else {
			c.indexNew++
		}
	}
	return c
}

// hookedBackend wraps every table of a backend to watch or break its writes.
type hookedBackend struct {
	store.Backend
	// plain hides the embedded store's purges, as Azure has none: the
	// engine then runs the queue design on it.
	plain bool
	// before runs ahead of every write; an error fails the write.
	before func(table string, op string, keys []store.Key) error
	// after runs once a write succeeded; an error is returned instead, as
	// from a process that died before the write's reply: a crash taken in
	// another write's before must not leave this one acknowledged when the
	// crashed store may lack it.
	after func() error
}

// replied is err, or after's error for a write that succeeded.
func (b *hookedBackend) replied(err error) error {
	if err != nil || b.after == nil {
		return err
	}
	return b.after()
}

func (b *hookedBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return &hookedTable{Table: t, b: b}, nil
}

type hookedTable struct {
	store.Table
	b *hookedBackend
}

// transactingBackend is a hookedBackend that keeps the embedded store's
// transactions, each hooked as one write: creates then write both rows at
// once, as the daemon's do, which the sweep a plan prepares requires.
type transactingBackend struct{ *hookedBackend }

func (b transactingBackend) Transact(ctx context.Context, ops []store.TableOp) error {
	keys := make([]store.Key, len(ops))
	inner := make([]store.TableOp, len(ops))
	for i, op := range ops {
		keys[i] = key(op.Op.Entity)
		inner[i] = store.TableOp{Table: unhooked(op.Table), Op: op.Op}
	}
	if b.before != nil {
		if err := b.before(ops[0].Table.Name(), "transact", keys); err != nil {
			return err
		}
	}
	return b.replied(b.Backend.(store.Transactor).Transact(ctx, inner))
}

// purgingBackend is a transactingBackend that keeps the embedded store's
// tallies and exclusive batches, each batch hooked as one write
// ("exclusive"), so a crash is taken before it or after it.
type purgingBackend struct{ transactingBackend }

func (b purgingBackend) purger() store.Purger { return b.Backend.(store.Purger) }

func (b purgingBackend) Tally(ctx context.Context, table string) error {
	return b.purger().Tally(ctx, table)
}

func (b purgingBackend) AwaitTally(ctx context.Context, table string) error {
	return b.purger().AwaitTally(ctx, table)
}

func (b purgingBackend) Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error {
	return b.purger().Tallies(ctx, table, partitions, through, visit)
}

func (b purgingBackend) MinuteKeyed(ctx context.Context, table string) error {
	return b.purger().MinuteKeyed(ctx, table)
}

func (b purgingBackend) Exclusive(ctx context.Context, through time.Time, stage func(context.Context, store.PurgeBatch) error) error {
	if b.before != nil {
		if err := b.before("", "exclusive", nil); err != nil {
			return err
		}
	}
	return b.replied(b.purger().Exclusive(ctx, through, func(ctx context.Context, pb store.PurgeBatch) error {
		return stage(ctx, pb)
	}))
}

// unhooked is the table a hookedBackend wrapped.
func unhooked(t store.Table) store.Table {
	if h, ok := t.(*hookedTable); ok {
		return h.Table
	}
	return t
}

func (h *hookedTable) hook(op string, keys ...store.Key) error {
	if h.b.before == nil {
		return nil
	}
	return h.b.before(h.Name(), op, keys)
}

func key(e store.Entity) store.Key { return store.Key{PartitionKey: e.PartitionKey, RowKey: e.RowKey} }

func (h *hookedTable) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	if err := h.hook("insert", key(e)); err != nil {
		return store.Entity{}, err
	}
	stored, err := h.Table.Insert(ctx, e)
	return stored, h.b.replied(err)
}

func (h *hookedTable) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	if err := h.hook("upsert", key(e)); err != nil {
		return store.Entity{}, err
	}
	stored, err := h.Table.Upsert(ctx, e, mode)
	return stored, h.b.replied(err)
}

func (h *hookedTable) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	if err := h.hook("update", key(e)); err != nil {
		return store.Entity{}, err
	}
	stored, err := h.Table.Update(ctx, e, mode, ifMatch)
	return stored, h.b.replied(err)
}

func (h *hookedTable) Delete(ctx context.Context, pk, rk, ifMatch string) error {
	if err := h.hook("delete", store.Key{PartitionKey: pk, RowKey: rk}); err != nil {
		return err
	}
	return h.b.replied(h.Table.Delete(ctx, pk, rk, ifMatch))
}

func (h *hookedTable) Batch(ctx context.Context, ops []store.Op) error {
	keys := make([]store.Key, len(ops))
	kind := "batch"
	for i, op := range ops {
		keys[i] = key(op.Entity)
		switch {
		case op.Kind == store.OpDelete:
			kind = "batch-delete"
		case op.Kind == store.OpInsert && kind == "batch":
			kind = "batch-insert" // a task's record, guarded by its job's lease
		}
	}
	if err := h.hook(kind, keys...); err != nil {
		return err
	}
	return h.b.replied(h.Table.Batch(ctx, ops))
}

// errDead is what every write returns once a simulated crash happened.
var errDead = errors.New("test: process is dead")

// crashAfter kills the store after its n-th write. On the embedded store it
// keeps what was synced at that instant as the filesystem a restarted
// process finds.
type crashAfter struct {
	mu      sync.Mutex
	n       int
	writes  int
	fs      *vfs.MemFS
	dead    bool
	crashed *vfs.MemFS
}

func (c *crashAfter) before(string, string, []store.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errDead
	}
	c.writes++
	if c.writes > c.n {
		c.dead = true
		if c.fs != nil {
			c.crashed = c.fs.CrashClone(vfs.CrashCloneCfg{})
		}
		return errDead
	}
	return nil
}

// after is hookedBackend's after: a write that ends once the crash happened
// gets no reply.
func (c *crashAfter) after() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errDead
	}
	return nil
}

// kill crashes the store now, whatever its count of writes.
func (c *crashAfter) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.dead = true
		if c.fs != nil {
			c.crashed = c.fs.CrashClone(vfs.CrashCloneCfg{})
		}
	}
}

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }
