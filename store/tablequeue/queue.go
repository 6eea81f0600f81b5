package tablequeue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
)

// Partitions of the queue table.
const (
	readyPartition  = "ready"
	poisonPartition = "poison"
)

// Property names of a message entity.
const (
	propBody         = "Body"
	propVisibleAt    = "VisibleAt"
	propDequeueCount = "DequeueCount"
	// propDeadLettered is when a poison message was dead-lettered.
	propDeadLettered = "DeadLettered"
)

// ErrLostMessage reports a Delete of a message that another receiver took
// after its visibility timeout passed.
var ErrLostMessage = errors.New("tablequeue: message was received again")

// Message is one received message.
type Message struct {
	// ID identifies the message in the queue.
	ID string
	// Body is what was sent.
	Body []byte
	// DequeueCount is how many times the message was received, this time included.
	DequeueCount int
	// Receipt proves this receive: only the latest receiver can delete.
	Receipt string
}

// Options configures Open.
type Options struct {
	// Now is the clock for visibility; nil means time.Now.
	Now func() time.Time
}

// Queue is a durable queue on one table.
type Queue struct {
	table store.Table
	now   func() time.Time
}

// Open returns the queue kept in table.
func Open(table store.Table, opts Options) *Queue {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Queue{table: table, now: opts.Now}
}

// Send adds a message, visible at once.
func (q *Queue) Send(ctx context.Context, body []byte) error {
	_, err := q.table.Insert(ctx, store.Entity{
		PartitionKey: readyPartition,
		RowKey:       newID(q.now()),
		Properties: store.Properties{
			propBody:         body,
			propVisibleAt:    q.now().UTC(),
			propDequeueCount: int32(0),
		},
	})
	if err != nil {
		return fmt.Errorf("tablequeue: send: %w", err)
	}
	return nil
}

// Receive returns up to max visible messages, oldest first, and hides each
// for visibility. A message not deleted in time is delivered again.
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]Message, error) {
	now := q.now().UTC()
	var out []Message
	// Messages in flight sit at the front until deleted; read a little past
	// them rather than a whole page, since every row read is decoded.
	query := store.Query{PartitionKey: readyPartition, Limit: min(store.MaxPageSize, max+32)}
	for len(out) < max {
		page, err := q.table.Query(ctx, query)
		if err != nil {
			return out, fmt.Errorf("tablequeue: receive: %w", err)
		}
		for _, e := range page.Entities {
			if len(out) == max {
				break
			}
			visibleAt, _ := e.Properties[propVisibleAt].(time.Time)
			if visibleAt.After(now) {
				continue
			}
			count, _ := e.Properties[propDequeueCount].(int32)
			e.Properties[propVisibleAt] = now.Add(visibility)
			e.Properties[propDequeueCount] = count + 1
			taken, err := q.table.Update(ctx, e, store.Replace, e.ETag)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				continue // another receiver took it first
			}
			if err != nil {
				return out, fmt.Errorf("tablequeue: receive: %w", err)
			}
			body, _ := e.Properties[propBody].([]byte)
			out = append(out, Message{ID: e.RowKey, Body: body, DequeueCount: int(count + 1), Receipt: taken.ETag})
		}
		if page.Next == nil {
			break
		}
		query.Resume = page.Next
	}
	return out, nil
}

// Extend hides a received message for visibility from now, so that a
// receiver still working on it keeps it, and returns it with its new
// receipt. A message received again since, or deleted, fails with
// ErrLostMessage.
func (q *Queue) Extend(ctx context.Context, m Message, visibility time.Duration) (Message, error) {
	e := store.Entity{PartitionKey: readyPartition, RowKey: m.ID, Properties: store.Properties{propVisibleAt: q.now().UTC().Add(visibility)}}
	written, err := q.table.Update(ctx, e, store.Merge, m.Receipt)
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		return m, fmt.Errorf("%w: %s", ErrLostMessage, m.ID)
	case err != nil:
		return m, fmt.Errorf("tablequeue: extend: %w", err)
	}
	m.Receipt = written.ETag
	return m, nil
}

// ReleaseAll makes every message in flight visible again at once and
// returns how many it released. Only for a queue no other receiver uses: a
// process restarting finds the messages its previous run held, which nobody
// else can be working on, and need not wait out their visibility timeout.
func (q *Queue) ReleaseAll(ctx context.Context) (int, error) {
	now := q.now().UTC()
	released := 0
	query := store.Query{PartitionKey: readyPartition}
	for {
		page, err := q.table.Query(ctx, query)
		if err != nil {
			return released, fmt.Errorf("tablequeue: release: %w", err)
		}
		for _, e := range page.Entities {
			if visibleAt, _ := e.Properties[propVisibleAt].(time.Time); !visibleAt.After(now) {
				continue
			}
			release := store.Entity{PartitionKey: readyPartition, RowKey: e.RowKey, Properties: store.Properties{propVisibleAt: now}}
			_, err := q.table.Update(ctx, release, store.Merge, e.ETag)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				continue // received or deleted since: not left behind
			}
			if err != nil {
				return released, fmt.Errorf("tablequeue: release: %w", err)
			}
			released++
		}
		if page.Next == nil {
			return released, nil
		}
		query.Resume = page.Next
	}
}

// Delete removes a received message for good. Deleting a message already
// gone succeeds; deleting one that was received again since fails with
// ErrLostMessage, since its new receiver now owns it.
func (q *Queue) Delete(ctx context.Context, m Message) error {
	err := q.table.Delete(ctx, readyPartition, m.ID, m.Receipt)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: %s", ErrLostMessage, m.ID)
	case err != nil:
		return fmt.Errorf("tablequeue: delete: %w", err)
	}
	return nil
}

// DeadLetter moves a received message to the poison partition, where it is
// kept for operators, never delivered again, until RetireDeadLetters.
func (q *Queue) DeadLetter(ctx context.Context, m Message) error {
	_, err := q.table.Upsert(ctx, store.Entity{
		PartitionKey: poisonPartition,
		RowKey:       m.ID,
		Properties: store.Properties{propBody: m.Body, propDequeueCount: int32(m.DequeueCount),
			propDeadLettered: q.now().UTC()},
	}, store.Replace)
	if err != nil {
		return fmt.Errorf("tablequeue: dead-letter: %w", err)
	}
	return q.Delete(ctx, m)
}

// RetireDeadLetters deletes the poison messages dead-lettered before
// horizon and returns how many it deleted: a dead letter is kept for its
// operators as long as the record of its job, not for ever. One without a
// time, from an earlier release, goes by its send time.
func (q *Queue) RetireDeadLetters(ctx context.Context, horizon time.Time) (int, error) {
	retired := 0
	query := store.Query{PartitionKey: poisonPartition}
	for {
		page, err := q.table.Query(ctx, query)
		if err != nil {
			return retired, fmt.Errorf("tablequeue: retire dead letters: %w", err)
		}
		for _, e := range page.Entities {
			at, ok := e.Properties[propDeadLettered].(time.Time)
			if !ok {
				at = sentAt(e.RowKey)
			}
			if !at.Before(horizon) {
				continue
			}
			if err := q.table.Delete(ctx, poisonPartition, e.RowKey, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
				return retired, fmt.Errorf("tablequeue: retire dead letters: %w", err)
			}
			retired++
		}
		if page.Next == nil {
			return retired, nil
		}
		query.Resume = page.Next
	}
}

// Depth counts the messages not yet deleted, those in flight included and
// dead letters excluded, as Azure Queue Storage counts them.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	if c, ok := q.table.(store.Counter); ok {
		n, err := c.CountRows(ctx, readyPartition, store.Range{})
		if err != nil {
			return 0, fmt.Errorf("tablequeue: depth: %w", err)
		}
		return n, nil
	}
	var n int64
	query := store.Query{PartitionKey: readyPartition}
	for {
		page, err := q.table.Query(ctx, query)
		if err != nil {
			return 0, fmt.Errorf("tablequeue: depth: %w", err)
		}
		n += int64(len(page.Entities))
		if page.Next == nil {
			return n, nil
		}
		query.Resume = page.Next
	}
}

// newID orders messages by send time; the random tail keeps ids unique
// across senders.
func newID(now time.Time) string {
	var tail [6]byte
	_, _ = rand.Read(tail[:])
	return fmt.Sprintf("%020d-%s", now.UnixNano(), hex.EncodeToString(tail[:]))
}

// sentAt is the send time an id of newID holds; the zero time for another.
func sentAt(id string) time.Time {
	nanos, _, ok := strings.Cut(id, "-")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
