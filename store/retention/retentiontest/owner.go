package retentiontest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// steppedClock is real time plus an offset the test steps forward, so a
// lease runs out without waiting for it.
type steppedClock struct{ offset atomic.Int64 }

func (c *steppedClock) Now() time.Time       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *steppedClock) step(d time.Duration) { c.offset.Add(int64(d)) }

// signalHandler is a slog handler that closes a channel at the first
// record whose message holds a string.
type signalHandler struct {
	want string
	once *sync.Once
	seen chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.want) {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// testOldOwnerStopsOnceItsLeaseIsTaken: replica a plans a job and stalls
// (a long GC pause, a partition from the store) while writing its second
// task; its lease runs out and replica b takes the job over and plans it
// up to that same task. When a wakes, its write of the task is refused, it
// writes nothing more to the job or its tasks and says why; b finishes the
// job alone, with exact counts and no primary row left without its index
// row.
func testOldOwnerStopsOnceItsLeaseIsTaken(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		const cameras = 6
		a := ts.open(t, quickOptions())
		a.Seed(t, cameras)
		clock := &steppedClock{}
		tasksTable := queue.DefaultTasksTable
		secondTask := images.Single.String() + "_000001"
		writesTask := func(table, op string, keys []store.Key, row string) bool {
			if !strings.EqualFold(table, tasksTable) || (op != "insert" && op != "batch-insert") {
				return false
			}
			for _, k := range keys {
				if k.RowKey == row {
					return true
				}
			}
			return false
		}

		// A lease far longer than the test keeps renewals out of it; the
		// clock's step runs it out.
		optsA, optsB := quickOptions(), quickOptions()
		optsA.ReplicaID, optsB.ReplicaID = "replica-a", "replica-b"
		optsA.LeaseDuration, optsB.LeaseDuration = time.Hour, time.Hour
		optsA.Now, optsB.Now = clock.Now, clock.Now
		aStopped := make(chan struct{})
		optsA.Logger = slog.New(signalHandler{want: "lease", once: &sync.Once{}, seen: aStopped})

		var mu sync.Mutex
		var jobID string
		woken := false          // a has been let go on
		var wroteAgain []string // a's job and task writes after it was let go
		aAtTask, aGo := make(chan struct{}), make(chan struct{})
		var aOnce sync.Once
		a.Opts = optsA
		a.OpenEngine(t, &HookedBackend{Backend: a.Base, Before: func(table, op string, keys []store.Key) error {
			if writesTask(table, op, keys, secondTask) {
				first := false
				aOnce.Do(func() { first = true })
				if first {
					close(aAtTask)
					<-aGo
					return nil
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !woken {
				return nil
			}
			job := strings.EqualFold(table, retention.DefaultJobsTable) && len(keys) == 1 && keys[0].RowKey == jobID
			task := strings.EqualFold(table, tasksTable) && (op == "insert" || op == "batch" || op == "batch-insert")
			if job || task {
				wroteAgain = append(wroteAgain, table+" "+op)
			}
			return nil
		}})
		a.Run(t)
		// A failure must not leave a replica parked in a hook: the engines
		// stop (cleanups run last first) only once it is let go.
		letAGo := sync.OnceFunc(func() { close(aGo) })
		t.Cleanup(letAGo)
		started, err := a.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		jobID = started.ID
		mu.Unlock()
		select {
		case <-aAtTask:
		case <-time.After(patience):
			t.Fatal("replica a never reached its second task")
		}
		// a's first task ends first: the clock's step would otherwise show
		// its message to b while a's worker still runs it, two deliveries
		// at once, whose count is rightly flagged a lower bound.
		for deadline := time.Now().Add(patience); !allTasksDone(t, a.Base); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("replica a's first task never ended")
			}
		}

		clock.step(2 * time.Hour)
		bAtTask, bGo := make(chan struct{}), make(chan struct{})
		var bOnce sync.Once
		b := &Fixture{Base: a.Base, Queue: a.Queue, Opts: optsB, AzureEngine: a.AzureEngine, Clock: a.Clock, Harness: a.Harness}
		b.OpenEngine(t, &HookedBackend{Backend: a.Base, Before: func(table, op string, keys []store.Key) error {
			if writesTask(table, op, keys, secondTask) {
				bOnce.Do(func() {
					close(bAtTask)
					<-bGo
				})
			}
			return nil
		}})
		b.Run(t)
		letBGo := sync.OnceFunc(func() { close(bGo) })
		t.Cleanup(letBGo)
		select {
		case <-bAtTask:
		case <-time.After(patience):
			t.Fatal("replica b never took the job over")
		}

		// a wakes before b writes the task both planned.
		mu.Lock()
		woken = true
		mu.Unlock()
		letAGo()
		deadline := time.After(patience)
	waitA:
		for {
			mu.Lock()
			wrote := wroteAgain
			mu.Unlock()
			if len(wrote) > 0 {
				t.Fatalf("replica a went on writing after its lease was taken: %v", wrote)
			}
			select {
			case <-aStopped:
				break waitA
			case <-time.After(5 * time.Millisecond):
			case <-deadline:
				t.Fatal("replica a never said it lost its lease")
			}
		}
		letBGo()

		j := b.Await(t, started.ID)
		if j.State != retention.Succeeded || j.Owner != "replica-b" {
			t.Fatalf("job %s (%s) owned by %s; want b to finish it", j.State, j.Error, j.Owner)
		}
		wantCounts(t, "taken-over job", j.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
			MetadataRows: cameras * expiredPerCamera, IndexRows: cameras * expiredPerCamera})
		if got := b.Census(t, images.Single, j.Boundary()); got != (Census{PrimaryNew: cameras * keptPerCamera, IndexNew: cameras * keptPerCamera}) {
			t.Fatalf("after the purge %+v; want every expired row gone, every kept one with its index row", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(wroteAgain) > 0 {
			t.Fatalf("replica a went on writing after its lease was taken: %v", wroteAgain)
		}
	})
}
