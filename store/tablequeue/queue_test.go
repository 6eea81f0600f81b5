package tablequeue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/tablequeue"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func open(t *testing.T) (*tablequeue.Queue, store.Table, *clock) {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tbl, err := db.Table(t.Context(), "WorkQueue")
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return tablequeue.Open(tbl, tablequeue.Options{Now: c.Now}), tbl, c
}

func receive(t *testing.T, q *tablequeue.Queue, max int) []tablequeue.Message {
	t.Helper()
	msgs, err := q.Receive(t.Context(), max, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func bodies(msgs []tablequeue.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

func TestDeliveryOrderAndVisibility(t *testing.T) {
	q, _, c := open(t)
	for i := range 3 {
		if err := q.Send(t.Context(), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Millisecond)
	}
	first := receive(t, q, 2)
	if got := fmt.Sprint(bodies(first)); got != "[0 1]" {
		t.Fatalf("first receive %s, want the two oldest", got)
	}
	if got := fmt.Sprint(bodies(receive(t, q, 5))); got != "[2]" {
		t.Fatalf("second receive %s, want only the one not in flight", got)
	}
	if err := q.Delete(t.Context(), first[0]); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, q, 5); len(got) != 0 {
		t.Fatalf("receive before the visibility timeout: %s", bodies(got))
	}
	c.Advance(time.Minute)
	again := receive(t, q, 5)
	if got := fmt.Sprint(bodies(again)); got != "[1 2]" {
		t.Fatalf("after the timeout %s, want the undeleted messages again", got)
	}
	for _, m := range again {
		if m.DequeueCount != 2 {
			t.Errorf("message %s dequeue count %d, want 2", m.Body, m.DequeueCount)
		}
	}
}

func TestDeleteAfterRedeliveryIsLost(t *testing.T) {
	q, _, c := open(t)
	if err := q.Send(t.Context(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	stale := receive(t, q, 1)[0]
	c.Advance(2 * time.Minute)
	fresh := receive(t, q, 1)[0]
	if err := q.Delete(t.Context(), stale); !errors.Is(err, tablequeue.ErrLostMessage) {
		t.Fatalf("delete by the first receiver: %v, want ErrLostMessage", err)
	}
	if err := q.Delete(t.Context(), fresh); err != nil {
		t.Fatalf("delete by the current receiver: %v", err)
	}
	if err := q.Delete(t.Context(), fresh); err != nil {
		t.Fatalf("second delete of a deleted message: %v, want nil", err)
	}
}

// TestExtendKeepsAMessageHidden: a receiver extending its message keeps it
// past the first timeout, with a new receipt; the old one and a stale
// receiver's extension are refused.
func TestExtendKeepsAMessageHidden(t *testing.T) {
	q, _, c := open(t)
	if err := q.Send(t.Context(), []byte("slow")); err != nil {
		t.Fatal(err)
	}
	first := receive(t, q, 1)[0]
	held := first
	for range 3 {
		c.Advance(40 * time.Second)
		extended, err := q.Extend(t.Context(), held, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if extended.Receipt == held.Receipt || extended.ID != held.ID || string(extended.Body) != "slow" {
			t.Fatalf("extended %+v from %+v, want the same message with a new receipt", extended, held)
		}
		held = extended
		if got := receive(t, q, 1); len(got) != 0 {
			t.Fatalf("an extended message was delivered again %s after its first receive", 40*time.Second)
		}
	}
	if err := q.Delete(t.Context(), first); !errors.Is(err, tablequeue.ErrLostMessage) {
		t.Fatalf("delete with the receipt before the extension: %v, want ErrLostMessage", err)
	}
	c.Advance(2 * time.Minute)
	taker := receive(t, q, 1)
	if len(taker) != 1 || taker[0].DequeueCount != 2 {
		t.Fatalf("after the extension ran out: %+v, want the message delivered a second time", taker)
	}
	if _, err := q.Extend(t.Context(), held, time.Minute); !errors.Is(err, tablequeue.ErrLostMessage) {
		t.Fatalf("extension by the receiver that lost it: %v, want ErrLostMessage", err)
	}
	if err := q.Delete(t.Context(), taker[0]); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseAllMakesInFlightVisible: a restarted sole receiver gets back
// at once the messages its previous run held, and only those.
func TestReleaseAllMakesInFlightVisible(t *testing.T) {
	q, _, c := open(t)
	for _, body := range []string{"held", "also held", "waiting"} {
		if err := q.Send(t.Context(), []byte(body)); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Millisecond)
	}
	held := receive(t, q, 2)
	n, err := q.ReleaseAll(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("ReleaseAll: %d, %v; want the 2 in flight", n, err)
	}
	again := receive(t, q, 5)
	if got := fmt.Sprint(bodies(again)); got != "[held also held waiting]" {
		t.Fatalf("after ReleaseAll %s, want every message at once", got)
	}
	if err := q.Delete(t.Context(), held[0]); !errors.Is(err, tablequeue.ErrLostMessage) {
		t.Fatalf("delete with a receipt from before the release: %v, want ErrLostMessage", err)
	}
	if n, err := q.ReleaseAll(t.Context()); err != nil || n != 3 {
		t.Fatalf("second ReleaseAll: %d, %v; want 3", n, err)
	}
}

func TestDeadLetter(t *testing.T) {
	q, tbl, _ := open(t)
	if err := q.Send(t.Context(), []byte("poison")); err != nil {
		t.Fatal(err)
	}
	m := receive(t, q, 1)[0]
	if err := q.DeadLetter(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	page, err := tbl.Query(t.Context(), store.Query{PartitionKey: "poison"})
	if err != nil || len(page.Entities) != 1 || string(page.Entities[0].Properties["Body"].([]byte)) != "poison" {
		t.Fatalf("poison partition: %+v, %v", page.Entities, err)
	}
	if got := receive(t, q, 1); len(got) != 0 {
		t.Fatalf("dead-lettered message delivered again: %s", bodies(got))
	}
}

// TestConcurrentReceiversShareWork checks that each message goes to one
// receiver while it is in flight.
func TestConcurrentReceiversShareWork(t *testing.T) {
	q, _, _ := open(t)
	const n = 200
	for i := range n {
		if err := q.Send(context.Background(), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				msgs, err := q.Receive(context.Background(), 7, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(msgs) == 0 {
					return
				}
				mu.Lock()
				for _, m := range msgs {
					seen[string(m.Body)]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d distinct messages received, want %d", len(seen), n)
	}
	for body, count := range seen {
		if count != 1 {
			t.Errorf("message %s received %d times while in flight", body, count)
		}
	}
}

// TestDepth counts messages in flight and not dead letters, with the
// table's counter and without it.
func TestDepth(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "counter", true: "query"}[plain], func(t *testing.T) {
			q, tbl, c := open(t)
			if plain {
				q = tablequeue.Open(struct{ store.Table }{tbl}, tablequeue.Options{Now: c.Now})
			}
			for i := range 3 {
				if err := q.Send(t.Context(), []byte(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
			}
			msgs, err := q.Receive(t.Context(), 2, time.Minute)
			if err != nil || len(msgs) != 2 {
				t.Fatalf("received %d, %v; want 2", len(msgs), err)
			}
			wantDepth(t, q, 3)
			if err := q.Delete(t.Context(), msgs[0]); err != nil {
				t.Fatal(err)
			}
			if err := q.DeadLetter(t.Context(), msgs[1]); err != nil {
				t.Fatal(err)
			}
			wantDepth(t, q, 1)
		})
	}
}

func wantDepth(t *testing.T, q *tablequeue.Queue, want int64) {
	t.Helper()
	if n, err := q.Depth(t.Context()); err != nil || n != want {
		t.Errorf("Depth = %d, %v; want %d", n, err, want)
	}
}

// TestRetireDeadLetters checks that dead letters are kept until the horizon
// passes their dead-lettering, then deleted, and that one recorded without
// its time, as an earlier release wrote it, goes by its send time.
func TestRetireDeadLetters(t *testing.T) {
	q, tbl, c := open(t)
	for _, body := range []string{"old", "new"} {
		if err := q.Send(t.Context(), []byte(body)); err != nil {
			t.Fatal(err)
		}
		if err := q.DeadLetter(t.Context(), receive(t, q, 1)[0]); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Hour)
	}
	// A dead letter of an earlier release: no time of its own, sent first.
	if _, err := tbl.Insert(t.Context(), store.Entity{PartitionKey: "poison", RowKey: fmt.Sprintf("%020d-legacy", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()),
		Properties: store.Properties{"Body": []byte("legacy")}}); err != nil {
		t.Fatal(err)
	}
	left := func() []string {
		t.Helper()
		page, err := tbl.Query(t.Context(), store.Query{PartitionKey: "poison"})
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for _, e := range page.Entities {
			bodies = append(bodies, string(e.Properties["Body"].([]byte)))
		}
		return bodies
	}
	// Between the two dead letterings: the first and the legacy one go.
	if n, err := q.RetireDeadLetters(t.Context(), c.Now().Add(-90*time.Minute)); err != nil || n != 2 {
		t.Fatalf("RetireDeadLetters = %d, %v; want 2", n, err)
	}
	if got := left(); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("dead letters left: %q, want the newer one", got)
	}
	if n, err := q.RetireDeadLetters(t.Context(), c.Now().Add(-90*time.Minute)); err != nil || n != 0 {
		t.Fatalf("second RetireDeadLetters = %d, %v; want 0", n, err)
	}
	if n, err := q.RetireDeadLetters(t.Context(), c.Now()); err != nil || n != 1 || len(left()) != 0 {
		t.Fatalf("RetireDeadLetters at now = %d, %v, left %q; want the last one gone", n, err, left())
	}
}
