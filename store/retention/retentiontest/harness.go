package retentiontest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store/azqueue"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// A Harness is a driver under test and the backend it runs on; a driver's
// test builds one and gives it to Run.
type Harness struct {
	// Name names the pair in the tests' names.
	Name string
	// Backend is the store the driver runs on.
	Backend Backend
	// Driver makes the driver under test. The options and hooks are the
	// queue design's: a scenario tunes it with the options and sets the
	// hooks to stop or watch its work; they outlive a reopened engine. A
	// driver that is not the queue design ignores both.
	Driver func(o queue.Options, hooks *queue.Hooks) retention.NewDriver
	// Queue says the driver is the queue design (tasks on a queue with
	// visibility timeouts, a janitor): its scenarios run too. On Pebble the
	// harness then hides the store's transactions and purges from the
	// engine, as Azure has none.
	Queue bool
}

// Backend is a store a harness opens afresh for each test.
type Backend int

const (
	// Pebble is the embedded store on an in-memory filesystem: a crash
	// keeps a copy of what was synced for the restarted process, rows age
	// on a virtual clock, and a scenario may run in a synctest bubble.
	Pebble Backend = iota
	// Azure is tables and a queue of the test's own on Azurite, which the
	// driver's test package starts (azurite.Main). Azure keeps every
	// acknowledged write, so a restarted process finds the store as the
	// crash left it; its clock is Azurite's.
	Azure
)

// mode is the pair's name as the scenarios' gates know it.
func (h Harness) mode() mode {
	switch {
	case h.Backend == Azure:
		return azureMode
	case h.Queue:
		return pebbleQueueMode
	default:
		return pebbleMode
	}
}

// Open opens a fresh store of h's backend, seeded with nothing, and an
// engine over it with h's driver.
func Open(t *testing.T, h Harness, opts Options) *Fixture {
	t.Helper()
	if h.Backend == Azure {
		return openAzure(t, h, opts)
	}
	return openPebble(t, h, opts, vfs.NewCrashableMem(), &Clock{})
}

// OpenInBubble is Open for a test inside a synctest bubble, where time is
// virtual and only moves while every goroutine of the test waits: the
// store's clock starts a month after the fixture's images, since the
// bubble's own starts in 2000, before them. Pebble only: Azurite is a real
// process.
func OpenInBubble(t *testing.T, h Harness, opts Options) *Fixture {
	t.Helper()
	if h.Backend != Pebble {
		t.Fatalf("harness %s: only the embedded store runs in a bubble", h.Name)
	}
	clock := &Clock{}
	clock.advance(base.AddDate(0, 1, 0).Sub(time.Now()))
	f := openPebble(t, h, opts, vfs.NewCrashableMem(), clock)
	f.writeTime = bubbleWriteTime
	return f
}

// bubbleWriteTime is how long, in a bubble's virtual time, each write of a
// store that StartCrashing kills takes (see crashAfter): a few
// milliseconds, as on a real disk, so that the tasks' visibility
// extensions (every third of quickOptions' 50 ms) and the job's lease
// renewals come between a purge's other writes.
const bubbleWriteTime = 5 * time.Millisecond

// openPebble opens the embedded store on fs with clock, which a restarted
// process keeps: time does not go back across a crash.
func openPebble(t *testing.T, h Harness, opts Options, fs *vfs.MemFS, clock *Clock) *Fixture {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: fs, Logger: opts.Logger, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &Fixture{FS: fs, Base: db, Opts: opts, AzureEngine: h.Queue, Clock: clock, Harness: h}
	f.Reopen = func(t *testing.T, crashed *vfs.MemFS) *Fixture {
		return openPebble(t, h, opts, crashed, clock)
	}
	f.OpenEngine(t, db)
	return f
}

// instant is a fixture's two clocks read at one moment: its store's and
// its engine's.
type instant struct{ store, engine time.Time }

// instant reads f's clocks. Pebble only: Azure's clock is Azurite's.
func (f *Fixture) instant() instant {
	engine := f.Clock.Now()
	if f.Opts.Now != nil {
		engine = f.Opts.Now()
	}
	return instant{store: f.Clock.Now(), engine: engine}
}

// reopenInBubble is Reopen for a test in a synctest bubble: the store as a
// restarted process finds it in crashed, with clocks that go on from at,
// read outside the bubble. The fixture's own clocks read the wall clock,
// which in a bubble starts in 2000.
func (f *Fixture) reopenInBubble(t *testing.T, crashed *vfs.MemFS, at instant) *Fixture {
	t.Helper()
	entered := time.Now()
	clock := &Clock{}
	clock.advance(at.store.Sub(entered))
	opts := f.Opts
	if opts.Now != nil {
		opts.Now = func() time.Time { return at.engine.Add(time.Since(entered)) }
	}
	g := openPebble(t, f.Harness, opts, crashed, clock)
	g.writeTime = bubbleWriteTime
	return g
}

// openAzure opens tables and a queue of the test's own on Azurite.
func openAzure(t *testing.T, h Harness, opts Options) *Fixture {
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
	f := &Fixture{Base: backend, Queue: q, Opts: opts, Harness: h}
	f.Reopen = func(t *testing.T, _ *vfs.MemFS) *Fixture {
		g := &Fixture{Base: backend, Queue: q, Opts: opts, Reopen: f.Reopen, Harness: h}
		g.OpenEngine(t, backend)
		return g
	}
	f.OpenEngine(t, backend)
	return f
}
