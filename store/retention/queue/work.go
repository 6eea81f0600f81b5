package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/tablequeue"
)

// work takes tasks from the queue until ctx ends.
func (e *driver) work(ctx context.Context) {
	for ctx.Err() == nil {
		msgs, err := e.queue.Receive(ctx, 1, e.tune.VisibilityTimeout)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("purge worker: receive failed", "err", err)
		}
		if len(msgs) == 0 {
			e.wait(ctx)
			continue
		}
		taskCtx, endSpan := e.startSpan(ctx, "purge.task", attribute.String("purge.message_id", msgs[0].ID),
			attribute.Int("purge.attempt", msgs[0].DequeueCount))
		err = e.process(taskCtx, msgs[0])
		endSpan(err)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("purge worker: task failed; it is retried", "err", err, "attempt", msgs[0].DequeueCount)
		}
	}
}

// What becomes of a task's message once a delivery has run.
type settlement int

const (
	settleDelete settlement = iota
	settleDeadLetter
)

// process runs one delivery of a task, keeping its message hidden from
// other workers for as long as it runs. A delivery that fails leaves the
// message to be delivered again.
func (e *driver) process(ctx context.Context, msg tablequeue.Message) error {
	taskCtx, held, stop := e.keepHidden(ctx, msg)
	settle, err := e.runTask(taskCtx, msg)
	stop()
	if err != nil {
		return err
	}
	if settle == settleDeadLetter {
		return e.queue.DeadLetter(ctx, held.current())
	}
	return e.queue.Delete(ctx, held.current())
}

// heldMessage is a message being worked on, with its latest receipt.
type heldMessage struct {
	mu  sync.Mutex
	msg tablequeue.Message
}

func (h *heldMessage) current() tablequeue.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msg
}

// keepHidden extends msg's visibility every third of the visibility timeout
// until stop, so that a task slower than the timeout is never delivered to
// a second worker while this one runs it. If the message is lost anyway
// (this process stalled past the timeout and another worker took it), the
// returned context is cancelled: the task is the other worker's now. stop
// ends the extensions and waits for them.
func (e *driver) keepHidden(ctx context.Context, msg tablequeue.Message) (context.Context, *heldMessage, func()) {
	ctx, cancel := context.WithCancel(ctx)
	held := &heldMessage{msg: msg}
	done := make(chan struct{})
	go func() {
		defer close(done)
		lost := retention.KeepAlive(ctx, e.tune.VisibilityTimeout, func(ctx context.Context) (bool, error) {
			extended, err := e.queue.Extend(ctx, held.current(), e.tune.VisibilityTimeout)
			if errors.Is(err, tablequeue.ErrLostMessage) {
				return true, err
			}
			if err == nil {
				held.mu.Lock()
				held.msg = extended
				held.mu.Unlock()
			}
			return false, err
		}, func(err error) {
			e.log.Warn("purge worker: extending a task's visibility failed; retrying", "id", msg.ID, "err", err)
		})
		if lost {
			e.log.Warn("purge worker: task taken by another worker; stopping it here", "id", msg.ID)
			cancel()
		}
	}()
	return ctx, held, func() {
		cancel()
		<-done
	}
}

// runTask runs one delivery of a task and says what becomes of its message.
// It is idempotent: a task delivered twice, or again after a crash, finds
// its finished cameras recorded and its deleted rows gone, and its counts
// were fixed before the first delete.
func (e *driver) runTask(ctx context.Context, msg tablequeue.Message) (settlement, error) {
	m, settle, err := e.claimTask(msg)
	if m == nil {
		return settle, err
	}
	defer e.endTask(*m)
	t, etag, err := e.tasks.get(ctx, *m)
	if errors.Is(err, store.ErrNotFound) {
		return settleDelete, nil
	}
	if err != nil {
		return 0, err
	}
	j, err := e.env.Job(ctx, m.JobID)
	if err != nil {
		return 0, err
	}
	if t.Done || t.Closed || j.State.Terminal() {
		return settleDelete, nil
	}
	// A cancel stops a task no delivery has begun. One an earlier delivery
	// began may have lost rows to it: it runs to its end, unpaced, so that
	// its counts, fixed before its first delete, are what it deleted.
	resumed := t.begun()
	if j.CancelRequested && !resumed {
		return e.stopTask(ctx, t, etag)
	}
	repo, ok := e.repos[t.Kind]
	if !ok {
		return 0, fmt.Errorf("retention: task of unknown kind %d", t.Kind)
	}
	primary, _ := repo.Tables()

	// The last delivery gives up on each camera it cannot count, check for
	// a hold or delete, rather than fail the task again: a camera whose
	// partition keeps failing would otherwise keep its task, and so its
	// job and the kind's lock, for ever.
	lastAttempt := msg.DequeueCount >= e.tune.MaxAttempts
	// Count before deleting, and record the counts: a redelivery after a
	// crash then reports the rows this task deleted, not the ones left.
	counted, err := e.count(ctx, t, primary, j, lastAttempt)
	if err != nil {
		return 0, err
	}
	if counted {
		if etag, err = e.tasks.put(ctx, t, etag); err != nil {
			return e.unrecorded(ctx, t, lastAttempt, err)
		}
	}

	// Each primary row goes with its index row. A cancel that comes
	// while the pace waits stops a task this delivery began before its
	// first delete.
	if !j.CancelRequested {
		switch err := e.paceUntilCancel(ctx, j, 2*pendingRows(t)); {
		case errors.Is(err, retention.ErrCancelled) && !resumed:
			return e.stopTask(ctx, t, etag)
		case errors.Is(err, retention.ErrCancelled):
		case err != nil:
			return 0, err
		}
	}
	if err := e.spareHeld(ctx, t, lastAttempt); err != nil {
		return 0, err
	}
	removed, failures := e.deleteCameras(ctx, repo, t, j)
	deleted := e.settleCameras(t, removed, failures, lastAttempt)
	if _, err := e.tasks.put(ctx, t, etag); err != nil {
		return e.unrecorded(ctx, t, lastAttempt, err)
	}
	e.countDeleted(t.Kind, deleted)
	e.notify()
	switch {
	case !t.Done:
		return 0, fmt.Errorf("retention: task %s/%s: %d cameras failed this attempt", t.JobID, taskRowKey(t.Kind, t.Seq), len(failures))
	case t.counts().DevicesFailed > 0:
		return settleDeadLetter, nil
	}
	return settleDelete, nil
}

// claimTask reads a task's message and claims the task for this
// delivery; a nil message is one not to run, settled as returned.
func (e *driver) claimTask(msg tablequeue.Message) (*taskMessage, settlement, error) {
	var m taskMessage
	if err := json.Unmarshal(msg.Body, &m); err != nil {
		e.log.Error("purge worker: unreadable message dead-lettered", "id", msg.ID, "err", err)
		return nil, settleDeadLetter, nil
	}
	switch running, ok := e.beginTask(m, msg.ID); {
	case !ok && running == msg.ID:
		// This very message, back while its delivery still runs (its
		// visibility could not be kept): left for later, not deleted, as it
		// may be the task's only message.
		return nil, 0, fmt.Errorf("retention: task %s/%s is still running in this process", m.JobID, taskRowKey(m.Kind, m.Seq))
	case !ok:
		e.log.Debug("purge worker: a second message of a task this process runs dropped", "job", m.JobID, "task", taskRowKey(m.Kind, m.Seq))
		return nil, settleDelete, nil
	}
	return &m, 0, nil
}

// settleCameras records in t what its delivery did to each pending
// camera: done with the rows it deleted, given up on the last attempt, or
// left pending (t not done) for the next delivery. It returns the counts
// of the cameras done.
func (e *driver) settleCameras(t *task, removed map[string]int64, failures map[string]error, lastAttempt bool) retention.Counts {
	t.Done = true
	var deleted retention.Counts
	for _, d := range t.Devices {
		if d.State != devicePending {
			continue
		}
		switch err := failures[d.ID]; {
		case err == nil:
			d.State = deviceDone
			d.Rows, d.LowerBound = deletedRows(d, removed[d.ID])
			deleted.MetadataRows += d.Rows
			deleted.IndexRows += d.Rows
		case lastAttempt:
			e.giveUp(t, d, err)
		default:
			t.Done = false
		}
	}
	return deleted
}

// stopTask closes a task whose job's cancel came before any delivery
// began it, or before this delivery, which began it, deleted anything: its
// counts, this delivery's alone, are dropped, and the task is closed at the
// version this delivery holds (etag), so that the job's settling, which
// may close it too, and this delivery agree. No delivery runs it again.
func (e *driver) stopTask(ctx context.Context, t *task, etag string) (settlement, error) {
	for _, d := range t.Devices {
		if d.State == devicePending {
			d.Counted, d.Rows = false, 0
		}
	}
	t.Closed = true
	if _, err := e.tasks.put(ctx, t, etag); err != nil {
		return 0, fmt.Errorf("retention: closing the cancelled task %s/%s: %w", t.JobID, taskRowKey(t.Kind, t.Seq), err)
	}
	e.notify()
	return settleDelete, nil
}

// giveUp counts a camera of the task's last delivery failed: it keeps its
// rows, index rows included, for the next purge.
func (e *driver) giveUp(t *task, d *taskDevice, err error) {
	d.State = deviceFailed
	e.log.Error("purge: camera failed; the next purge retries it", "job", t.JobID, "kind", t.Kind.String(), "camera", d.ID, "err", err)
}

// unrecorded handles a task whose record could not be written. Before the
// last delivery the task is retried. At the last, nothing can record its
// cameras' fate where its job looks for it, so the task is marked lost on
// the job, which the job's engine ends failed (see awaitTasks), and its
// message goes to the dead letters. A write that lost to another
// delivery of the task is no fault of the record: that delivery goes on.
func (e *driver) unrecorded(ctx context.Context, t *task, lastAttempt bool, err error) (settlement, error) {
	if !lastAttempt || errors.Is(err, store.ErrConflict) {
		return 0, err
	}
	key := taskRowKey(t.Kind, t.Seq)
	e.log.Error("purge: a task's record cannot be written; its job fails", "job", t.JobID, "task", key, "err", err)
	if _, jerr := e.updateJob(ctx, t.JobID, func(j *retention.Job) error {
		if j.LostTask == "" {
			j.LostTask = key
		}
		return nil
	}); jerr != nil {
		return 0, errors.Join(err, jerr)
	}
	return settleDeadLetter, nil
}

// beginTask claims the task for this worker, or, when another of this
// process's workers runs it, returns the id of the message that one runs.
//
// A task can have two messages: a plan resumed after a crash sends again
// every task not done, since its first message may never have left, and
// that first message may be in flight or, on the embedded store, released
// at start (releaseLeftTasks). The second is dropped while the first runs:
// the running delivery keeps its own message until it settles, so a
// failure is still retried. The running message itself can also come back,
// if keeping it hidden failed: it is then left for later, never deleted.
// Workers of other processes are not seen here; a task two of them run at
// once still gets one record (its ETag), whose count is exact or flagged a
// lower bound (see deletedRows).
func (e *driver) beginTask(m taskMessage, msgID string) (running string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id, busy := e.working[m]; busy {
		return id, false
	}
	e.working[m] = msgID
	return "", true
}

func (e *driver) endTask(m taskMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.working, m)
}

// count fills in the expired row counts of the cameras not yet counted and
// reports whether it counted any.
// On the task's last delivery a camera that cannot be counted is given up
// (and reported counted, so that its state is recorded before any delete).
func (e *driver) count(ctx context.Context, t *task, primary store.Table, j *retention.Job, lastAttempt bool) (bool, error) {
	counted := false
	for _, d := range t.Devices {
		if d.Counted || d.State != devicePending {
			continue
		}
		n, thinned, err := e.countCamera(ctx, t.Kind, primary, d, j)
		switch {
		case err != nil && lastAttempt:
			e.giveUp(t, d, err)
			counted = true
			continue
		case err != nil:
			return false, err
		}
		d.Rows, d.Thinned, d.Counted, counted = n, thinned, true, true
	}
	return counted, nil
}

// countCamera counts the rows a camera's delete would remove, and of them
// those its thinning would.
func (e *driver) countCamera(ctx context.Context, kind images.Kind, primary store.Table, d *taskDevice, j *retention.Job) (rows, thinned int64, err error) {
	if expired, ok := d.expiredRows(j); ok {
		if rows, err = store.CountRows(ctx, primary, d.ID, expired); err != nil {
			return 0, 0, err
		}
	}
	if len(d.Thin) > 0 {
		if thinned, err = thinQueried(ctx, e.repos[kind], d.ID, d.Thin, nil, false); err != nil {
			return 0, 0, err
		}
	}
	return rows + thinned, thinned, nil
}

// pendingRows is how many rows the task's cameras not yet done hold, by
// their counts: what its delete is paced by.
func pendingRows(t *task) int64 {
	var n int64
	for _, d := range t.Devices {
		if d.State == devicePending {
			n += d.Rows
		}
	}
	return n
}

// deletedRows is what a camera's count becomes once its delete succeeded:
// the larger of its count before the delete and what the delete removed,
// and whether that may be short of what was deleted.
//
// Creates of already-expired instants go on during a purge, so the delete
// may remove more rows than were counted before it: the count becomes what
// the delete removed. A delivery that follows one that deleted and then
// stopped before recording it (a crash, or a second delivery after the
// first lost its visibility) removes only what the first left: the count
// fixed before the first delete stands. That is exact unless creates of
// expired instants landed between the first delivery's count and its
// delete; the count is then short by those rows alone (see
// retention.Counts.MetadataRows). Only a purge deletes images, and one purge runs at
// a time, so a delete that removes fewer rows than were counted before it
// follows such a delivery: the count is then flagged a lower bound.
func deletedRows(d *taskDevice, removed int64) (rows int64, lowerBound bool) {
	return max(d.Rows, removed), removed < d.Rows
}

// deleteCameras deletes the expired rows of the task's pending cameras,
// each before its own boundary (see taskDevice.expiredRows), and returns
// the primary rows removed and the error of each camera that failed.
func (e *driver) deleteCameras(ctx context.Context, repo *images.Repository, t *task, j *retention.Job) (map[string]int64, map[string]error) {
	removed, failures := map[string]int64{}, map[string]error{}
	for _, d := range t.Devices {
		if d.State != devicePending {
			continue
		}
		var n, thinned int64
		var err error
		ob := e.jobOutbox(j, t.Kind)
		if expired, ok := d.expiredRows(j); ok {
			n, err = deleteExpired(ctx, repo, d.ID, expired, ob)
		}
		if err == nil && len(d.Thin) > 0 {
			thinned, err = thinQueried(ctx, repo, d.ID, d.Thin, ob, true)
			// A late image thinned beyond the count is thinned too.
			d.Thinned = max(d.Thinned, thinned)
		}
		if err != nil {
			failures[d.ID] = err
		}
		removed[d.ID] = n + thinned
	}
	return removed, failures
}

// spareHeld marks the task's pending cameras that are on legal hold now,
// the holds read once just before their deletes: a hold placed after
// planning still spares a camera whose delete has not begun, index rows
// included. On the task's last delivery, holds that cannot be read give
// up its pending cameras, never deleted.
func (e *driver) spareHeld(ctx context.Context, t *task, lastAttempt bool) error {
	holds, err := e.env.Holds(ctx)
	if err != nil && !lastAttempt {
		return err
	}
	for _, d := range t.Devices {
		if d.State != devicePending {
			continue
		}
		if err != nil {
			e.giveUp(t, d, err)
			continue
		}
		if holds.Has(d.ID) {
			d.State = deviceHeld
			e.log.Info("purge: camera on legal hold spared", "job", t.JobID, "kind", t.Kind.String(), "camera", d.ID)
		}
	}
	return nil
}

// wait pauses a loop until something changes, the poll interval passes or
// ctx ends.
func (e *driver) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-e.Changed():
	case <-time.After(e.opts.PollInterval):
	}
}
