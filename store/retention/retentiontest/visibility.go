package retentiontest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
	"github.com/metadatad/metadatad/store/tablequeue"
)

// testSlowTaskIsWorkedOnce: a task whose deletes take three times the
// queue's visibility timeout keeps its message hidden while it runs, so no
// other worker takes it up at the same time.
func testSlowTaskIsWorkedOnce(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.eachInBubble(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		const visibility = time.Second // Azure's smallest
		opts := quickOptions()
		opts.VisibilityTimeout = visibility
		opts.GroupSize = 100 // one task
		opts.Workers = 4
		requireWorkedOnce(t, newFixture(t, opts), 3*visibility, false)
	})
}

// testSecondMessageOfARunningTaskIsNotWorkedBesideIt: a task can have two
// messages (a plan resumed after a crash sends again the tasks whose first
// message may never have left, and the first may be in flight). Every
// message is sent twice here, and the first delete is slow: the process
// must not work the task twice at once, and the counts stay exact, not
// flagged as a lower bound by a second run that found the rows gone.
func testSecondMessageOfARunningTaskIsNotWorkedBesideIt(t *testing.T, ts *suite) {
	ts.eachInBubble(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.GroupSize = 100 // one task
		opts.Workers = 4
		f := newFixture(t, opts)
		f.Queue = twiceSent{engineQueue(t, f)}
		// Long enough for another worker to take the second message.
		requireWorkedOnce(t, f, 500*time.Millisecond, false)
	})
}

// testTaskBackWhileItRunsWaits: a task's message comes back while its
// delivery still runs, because keeping it hidden failed. The process must
// not work the task beside itself, nor delete the message, the task's only
// one: that first delivery fails, and the purge still ends, exact, once the
// message comes back again.
func testTaskBackWhileItRunsWaits(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	ts.eachInBubble(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		const visibility = time.Second // Azure's smallest
		opts := quickOptions()
		opts.VisibilityTimeout = visibility
		opts.GroupSize = 100 // one task
		opts.Workers = 4
		f := newFixture(t, opts)
		f.Queue = unextended{engineQueue(t, f)}
		requireWorkedOnce(t, f, 3*visibility, true)
	})
}

// engineQueue is the queue the engine of f would use.
func engineQueue(t *testing.T, f *Fixture) queue.Queue {
	t.Helper()
	if f.Queue != nil {
		return f.Queue
	}
	q, err := f.Base.Table(t.Context(), queue.DefaultQueueTable)
	if err != nil {
		t.Fatal(err)
	}
	return tablequeue.Open(q, tablequeue.Options{Now: f.Opts.Now})
}

// requireWorkedOnce purges two cameras in one task whose first delete
// takes slow, then fails if failFirst, and requires exact counts and one
// delete at a time.
func requireWorkedOnce(t *testing.T, f *Fixture, slow time.Duration, failFirst bool) {
	t.Helper()
	var mu sync.Mutex
	inFlight, most, deletes := 0, 0, 0
	primary, _ := f.Repo(images.Single).Tables()
	f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, _ []store.Key) error {
		if table != primary.Name() || (op != "delete-ranges" && op != "batch-delete") {
			return nil
		}
		mu.Lock()
		inFlight++
		deletes++
		most = max(most, inFlight)
		first := deletes == 1
		mu.Unlock()
		if first {
			time.Sleep(slow)
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		if first && failFirst {
			return errors.New("first delete failed")
		}
		return nil
	}})
	f.Seed(t, 2)
	f.Run(t)
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if j.State != retention.Succeeded {
		t.Fatalf("purge: %s (%s)", j.State, j.Error)
	}
	wantCounts(t, "purge", j.Totals(), retention.Counts{DevicesTotal: 2, DevicesDone: 2,
		MetadataRows: 2 * expiredPerCamera, IndexRows: 2 * expiredPerCamera})
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Fatalf("%d workers deleted the task's rows at once, want 1", most)
	}
}

// twiceSent sends every message twice.
type twiceSent struct{ queue.Queue }

func (q twiceSent) Send(ctx context.Context, body []byte) error {
	if err := q.Queue.Send(ctx, body); err != nil {
		return err
	}
	return q.Queue.Send(ctx, body)
}

// unextended fails every extension of a message's visibility.
type unextended struct{ queue.Queue }

func (unextended) Extend(context.Context, tablequeue.Message, time.Duration) (tablequeue.Message, error) {
	return tablequeue.Message{}, errors.New("extension refused")
}
