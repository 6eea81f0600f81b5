package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// Device states within a task.
const (
	devicePending = ""
	deviceDone    = "done"
	deviceFailed  = "failed"
	// deviceHeld: a legal hold placed after planning spared the camera.
	deviceHeld = "held"
)

// taskDevice is one camera of a task.
type taskDevice struct {
	ID string `json:"id"`
	// Rows is the count of expired primary rows: fixed before any is
	// deleted, so that a redelivery after a crash still reports them, then
	// replaced by what the delete removed (see deletedRows); valid once
	// Counted.
	Rows    int64  `json:"rows"`
	Counted bool   `json:"counted,omitempty"`
	State   string `json:"state,omitempty"`
	// LowerBound marks Rows as possibly short (see deletedRows).
	LowerBound bool `json:"lowerBound,omitempty"`
	// Boundary, in a purge with policies, is the start of the minute of
	// the camera's own cutoff; zero means the job's.
	Boundary time.Time `json:"boundary,omitzero"`
	// NoAge, in a purge with policies, says the camera keeps its rows by
	// age and is only thinned.
	NoAge bool `json:"noAge,omitempty"`
	// Thin are the windows its policy's tiers thin (policy.Windows), and
	// Thinned the rows of Rows they delete.
	Thin    []policy.Window `json:"thin,omitempty"`
	Thinned int64           `json:"thinned,omitempty"`
}

// expiredRows is the row range of the camera's expired primary rows; false
// when it has none by age.
func (d *taskDevice) expiredRows(j *retention.Job) (store.Range, bool) {
	switch {
	case d.NoAge:
		return store.Range{}, false
	case !d.Boundary.IsZero():
		return images.ExpiredRows(d.Boundary), true
	}
	return images.ExpiredRows(j.Boundary()), true
}

// janitorBound is the boundary recorded for the janitor: it judges the
// camera's index rows captured before it, those of the rows its age
// purge and its thinning may have deleted.
func (d *taskDevice) janitorBound() time.Time {
	b := d.Boundary
	if d.NoAge {
		b = time.Time{}
	}
	return store.MaxTime(b, policy.NewestThinned(d.Thin))
}

// task is a group of cameras whose expired primary rows one worker deletes.
// Grouping amortises the queue and bookkeeping writes over many cameras, so
// the cost of a purge follows the rows it deletes rather than its cameras.
type task struct {
	JobID   string        `json:"jobId"`
	Kind    images.Kind   `json:"kind"`
	Seq     int           `json:"seq"`
	Devices []*taskDevice `json:"devices"`
	Done    bool          `json:"done,omitempty"`
	// Closed marks a task its job's cancellation caught before it
	// deleted: it never runs. See cancel.go.
	Closed bool `json:"closed,omitempty"`
}

// begun reports whether a delivery of the task has recorded counts, the
// write that precedes every delete: a begun task may have deleted rows.
// Its job's cancel waits for it: the delivery that began it closes it if it
// sees the cancel before deleting (stopTask); otherwise it, or any later
// delivery, runs it to its end, so that the job's counts hold what it
// deleted.
func (t *task) begun() bool {
	for _, d := range t.Devices {
		if d.Counted {
			return true
		}
	}
	return false
}

// taskMessage is the queue message of a task: its address only, so it
// stays far under queue message limits whatever the camera ids.
type taskMessage struct {
	JobID string      `json:"jobId"`
	Kind  images.Kind `json:"kind"`
	Seq   int         `json:"seq"`
}

func taskRowKey(kind images.Kind, seq int) string { return fmt.Sprintf("%s_%06d", kind, seq) }

// taskRows is the row range of one kind's tasks in a job's partition.
func taskRows(kind images.Kind) store.Range {
	return store.Range{From: kind.String() + "_", To: kind.String() + "`"} // '`' follows '_'
}

// counts are the task's contribution to its kind's counts.
func (t *task) counts() retention.Counts {
	c := retention.Counts{DevicesTotal: int64(len(t.Devices))}
	for _, d := range t.Devices {
		switch d.State {
		case deviceDone:
			c.DevicesDone++
			c.MetadataRows += d.Rows
			c.IndexRows += d.Rows // each primary row's, deleted after it
			c.ThinnedRows += d.Thinned
			c.MetadataRowsLowerBound = c.MetadataRowsLowerBound || d.LowerBound
		case deviceFailed:
			c.DevicesFailed++
		case deviceHeld:
			c.DevicesHeld++
		}
	}
	return c
}

// propDoc holds a task's document (in chunks: docProperty).
const propDoc = "Doc"

// taskStore keeps the tasks of every job, one partition per job.
type taskStore struct {
	table store.Table
}

// taskDocChunk is the most bytes of a task's document one property holds:
// a string property holds at most 64 KiB as UTF-16, and each UTF-8 byte is
// at most one UTF-16 unit, two bytes. A task of GroupSize cameras takes a
// few chunks; the entity stays far under its 1 MiB.
const taskDocChunk = 30_000

// docProperty names the property of the document's chunk i: Doc, then
// Doc1, Doc2 and so on, so that a task written in one chunk reads as before.
func docProperty(i int) string {
	if i == 0 {
		return propDoc
	}
	return propDoc + strconv.Itoa(i)
}

func (s *taskStore) entity(t *task) (store.Entity, error) {
	doc, err := json.Marshal(t)
	if err != nil {
		return store.Entity{}, fmt.Errorf("retention: encode task: %w", err)
	}
	props := store.Properties{}
	for i := 0; i == 0 || len(doc) > 0; i++ {
		n := min(len(doc), taskDocChunk)
		for n < len(doc) && !utf8.RuneStart(doc[n]) {
			n-- // a chunk ends between characters, so each is valid UTF-8
		}
		props[docProperty(i)] = string(doc[:n])
		doc = doc[n:]
	}
	return store.Entity{PartitionKey: t.JobID, RowKey: taskRowKey(t.Kind, t.Seq), Properties: props}, nil
}

func decodeTask(e store.Entity) (*task, error) {
	var doc strings.Builder
	for i := 0; ; i++ {
		chunk, ok := e.Properties[docProperty(i)].(string)
		if !ok {
			break
		}
		doc.WriteString(chunk)
	}
	var t task
	if err := json.Unmarshal([]byte(doc.String()), &t); err != nil {
		return nil, fmt.Errorf("retention: decode task %s/%s: %w", e.PartitionKey, e.RowKey, err)
	}
	return &t, nil
}

// create records a new task under ctx's lease (see ownedBatch); a task
// already recorded under its key, by this lease's earlier attempt, is kept.
func (s *taskStore) create(ctx context.Context, t *task) error {
	e, err := s.entity(t)
	if err != nil {
		return err
	}
	if err = s.ownedBatch(ctx, t.JobID, []store.Op{{Kind: store.OpInsert, Entity: e}}); errors.Is(err, store.ErrAlreadyExists) {
		return nil
	}
	return err
}

func (s *taskStore) get(ctx context.Context, m taskMessage) (*task, string, error) {
	e, err := s.table.Get(ctx, m.JobID, taskRowKey(m.Kind, m.Seq))
	if err != nil {
		return nil, "", err
	}
	t, err := decodeTask(e)
	return t, e.ETag, err
}

// put writes t if it is still at etag; store.ErrConflict if another worker
// wrote it since.
func (s *taskStore) put(ctx context.Context, t *task, etag string) (string, error) {
	e, err := s.entity(t)
	if err != nil {
		return "", err
	}
	written, err := s.table.Update(ctx, e, store.Replace, etag)
	return written.ETag, err
}

// taskPage is how many tasks one read of the tasks returns: enough to
// amortise a read, few enough that a page's documents stay small.
const taskPage = 50

// each calls visit for every task of one kind of a job, in order, holding
// one page of them at a time.
func (s *taskStore) each(ctx context.Context, jobID string, kind images.Kind, visit func(*task) error) error {
	return s.from(ctx, jobID, kind, 0, func(t *task) (bool, error) { return true, visit(t) })
}

// from calls visit for the tasks of one kind of a job from seq on, in
// order, until visit says to stop.
func (s *taskStore) from(ctx context.Context, jobID string, kind images.Kind, seq int, visit func(*task) (bool, error)) error {
	rows := taskRows(kind)
	rows.From = taskRowKey(kind, seq)
	q := store.Query{PartitionKey: jobID, Rows: rows, Limit: taskPage}
	for {
		page, err := s.table.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			t, err := decodeTask(e)
			if err != nil {
				return err
			}
			if more, err := visit(t); err != nil || !more {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		q.Resume = page.Next
	}
}

// deleteAll deletes every task of a job that has ended, a batch of its
// partition at a time. A late redelivery of one of their messages finds no
// task and is dropped.
func (s *taskStore) deleteAll(ctx context.Context, jobID string) error {
	_, err := deleteQueried(ctx, s.table, jobID, store.Range{})
	return err
}
