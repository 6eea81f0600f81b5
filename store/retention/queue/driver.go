package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/tablequeue"
)

// driver is the queue design: the seeds' design, for a backend with no
// transaction across partitions (Azure). Its plan sends tasks through the
// queue to the workers of every replica (work.go); each task's record, in
// the tasks table, keeps its counts, so every delivery resumes exactly.
type driver struct {
	env  *retention.Env
	opts retention.Options
	// tune are the design's own options, defaults filled in.
	tune  Options
	log   *slog.Logger
	tasks taskStore
	queue Queue
	// outbox is the table of deleted images with Options.Outbox, else nil.
	outbox store.Table
	repos  map[images.Kind]*images.Repository
	hooks  *Hooks

	mu sync.Mutex
	// working holds the tasks this process's workers are running (see
	// beginTask), under mu.
	working map[taskMessage]string
}

// Hooks are points in the queue design's work where a test stops or
// watches it; nil members call nothing.
type Hooks struct {
	// Janitor runs as a janitor pass begins, once a kind's tasks are done.
	Janitor func(job string, kind images.Kind)
	// Delete runs between a delete batch's pending outbox write and its
	// delete, given the batch's rows.
	Delete func(job string, rows []store.Entity)
	// Settle runs in each pass of a cancel's settling once the pass has
	// read its tasks, before it visits them.
	Settle func(job string, kind images.Kind)

	// driver is the one made with these hooks, for TaskDone and EndOutbox.
	driver *driver
}

// TaskDone reports whether the task stored under job and rowKey is done.
func (h *Hooks) TaskDone(ctx context.Context, job, rowKey string) (bool, error) {
	entity, err := h.driver.tasks.table.Get(ctx, job, rowKey)
	if err != nil {
		return false, err
	}
	t, err := decodeTask(entity)
	return err == nil && t.Done, err
}

// EndOutbox closes and reconciles the job's outbox of deleted images, as
// the job's end does before it seals it.
func (h *Hooks) EndOutbox(ctx context.Context, id string) error {
	j, err := h.driver.env.Job(ctx, id)
	if err != nil {
		return err
	}
	if err := h.driver.closeJobOutbox(ctx, j); err != nil {
		return err
	}
	return h.driver.reconcileOutbox(ctx, id)
}

// PlanBuckets is how many buckets the plan split the kind's cameras into
// (0 for one).
func PlanBuckets(p *retention.KindProgress) int { return queueState(p).Buckets }

// New is the queue design's retention.NewDriver with o: its tasks table
// and, without o.Queue, a queue in the table DefaultQueueTable.
func New(o Options) retention.NewDriver { return WithHooks(o, &Hooks{}) }

// WithHooks is New with hooks a test sets, at any time, to stop or watch
// the work.
func WithHooks(o Options, hooks *Hooks) retention.NewDriver {
	o = o.withDefaults()
	return func(ctx context.Context, env *retention.Env) (retention.Driver, error) {
		opts := env.Options()
		e := &driver{env: env, opts: opts, tune: o, log: env.Logger(), queue: o.Queue,
			outbox: env.Outbox(), repos: map[images.Kind]*images.Repository{}, hooks: hooks, working: map[taskMessage]string{}}
		for _, r := range opts.Repositories {
			e.repos[r.Kind()] = r
		}
		tasks, err := opts.Backend.Table(ctx, DefaultTasksTable)
		if err != nil {
			return nil, err
		}
		e.tasks = taskStore{table: tasks}
		hooks.driver = e
		if e.queue == nil {
			q, err := opts.Backend.Table(ctx, DefaultQueueTable)
			if err != nil {
				return nil, err
			}
			e.queue = tablequeue.Open(q, tablequeue.Options{Now: opts.Now})
		}
		return e, nil
	}
}

func (e *driver) updateJob(ctx context.Context, id string, change func(*retention.Job) error) (*retention.Job, error) {
	return e.env.UpdateJob(ctx, id, change)
}

func (e *driver) notify()                                        { e.env.Notify() }
func (e *driver) Changed() <-chan struct{}                       { return e.env.Changed() }
func (e *driver) countDeleted(k images.Kind, c retention.Counts) { e.env.CountDeleted(k, c) }

func (e *driver) pace(ctx context.Context, j *retention.Job, rows int64) error {
	return e.env.Pace(ctx, j, rows)
}

func (e *driver) paceUntilCancel(ctx context.Context, j *retention.Job, rows int64) error {
	return e.env.PaceUntilCancel(ctx, j, rows)
}

func (e *driver) rules(ctx context.Context, j *retention.Job, kind images.Kind) (*retention.Rules, error) {
	return e.env.Rules(ctx, j, kind)
}

func (e *driver) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	return e.env.StartSpan(ctx, name, attrs...)
}

// StartJob opens the outbox of a job that keeps one (outboxseal.go).
func (e *driver) StartJob(ctx context.Context, j *retention.Job) error {
	return e.openJobOutbox(ctx, j)
}

// AbandonStart closes it again.
func (e *driver) AbandonStart(ctx context.Context, j *retention.Job) error {
	return e.closeJobOutbox(ctx, j)
}

// DropJob deletes an ended job's tasks.
func (e *driver) DropJob(ctx context.Context, id string) error { return e.tasks.deleteAll(ctx, id) }

// deadLetterRetirer is a Queue that keeps its dead letters until told to
// delete the old ones (*tablequeue.Queue).
type deadLetterRetirer interface {
	RetireDeadLetters(ctx context.Context, horizon time.Time) (int, error)
}

// Retire deletes the dead letters of the queue in a table older than
// horizon, with the jobs they failed (an Azure poison queue's messages
// expire by their own TTL), and settles the pending records of image
// deletes that stopped (imagedelete.go).
func (e *driver) Retire(ctx context.Context, horizon time.Time) error {
	settled := e.settlePending(ctx)
	q, ok := e.queue.(deadLetterRetirer)
	if !ok {
		return settled
	}
	n, err := q.RetireDeadLetters(ctx, horizon)
	if n > 0 {
		e.log.Info("purge: retired old dead-lettered tasks", "messages", n, "dead_lettered_before", horizon)
	}
	return errors.Join(settled, err)
}

// queueProgress is a kind's progress in the queue design, kept in the
// job's record (retention.KindProgress.queue).
type queueProgress struct {
	// Buckets is how many buckets the plan splits cameras into (0 for
	// one), Bucket the next one to plan; BucketsSeq is the first task made
	// with that many buckets, BucketSeq the first made by the pass of
	// Bucket. See plan.
	Buckets    int `json:"buckets,omitempty"`
	Bucket     int `json:"bucket,omitempty"`
	BucketsSeq int `json:"bucketsSeq,omitempty"`
	BucketSeq  int `json:"bucketSeq,omitempty"`
	// Tasks is how many tasks the plan made, once it has ended.
	Tasks int `json:"tasks,omitempty"`
	// Tallied is how many tasks, from the first, are done and in retention.Counts.
	Tallied int `json:"tallied,omitempty"`
}

// Phases of the queue design, between retention.PhasePlan and retention.PhaseDone.
const (
	phaseWork = "work"
	// phaseJanitor: the kind's tasks are done; its orphaned index rows go
	// (see janitor.go).
	phaseJanitor = "janitor"
)

// queueState is the kind's queueProgress in the job's record.
func queueState(p *retention.KindProgress) *queueProgress {
	return retention.DriverState[queueProgress](p)
}

func (e *driver) Name() string { return "queue" }

// Serve runs Options.Workers workers, which take tasks of any job.
func (e *driver) Serve(ctx context.Context, wg *sync.WaitGroup) {
	for range e.tune.Workers {
		wg.Go(func() { e.work(ctx) })
	}
}

// BeginJob guards the job's tasks with its lease: from here a task's write
// holds only under it (owner.go).
func (e *driver) BeginJob(ctx context.Context, id string) error {
	held, ok := retention.HeldLease(ctx, id)
	if !ok {
		return fmt.Errorf("%w: job %s begins without its lease", retention.ErrLeaseLost, id)
	}
	return e.tasks.takeTasks(ctx, held)
}

func (e *driver) JobKeepsOutbox(dryRun bool) bool { return !dryRun }

func (e *driver) SealJobOutbox(ctx context.Context, id string) error {
	return e.sealJobOutbox(ctx, id)
}

func (e *driver) DeletedImages(ctx context.Context, after string, limit int) ([]retention.DeletedImage, error) {
	return e.sealedImages(ctx, after, limit)
}

func (e *driver) CheckResumeToken(tok string) error {
	_, err := parseSealToken(tok)
	return err
}

func (e *driver) RetireOutbox(ctx context.Context, cutoff time.Time) (int, error) {
	return e.retireSeals(ctx, cutoff)
}

// MarkOutboxRestored does nothing: the queue design's store (Azure) is
// restored by no command of this service.
func (e *driver) MarkOutboxRestored(context.Context) error { return nil }

func (e *driver) SettleCancelled(ctx context.Context, id string, kind images.Kind) error {
	return e.settleCancelled(ctx, id, kind)
}

// PurgeKind takes one kind through plan, work and janitor, from wherever
// a previous run left it.
func (e *driver) PurgeKind(ctx context.Context, id string, kind images.Kind) error {
	for {
		j, err := e.env.Job(ctx, id)
		if err != nil {
			return err
		}
		phase := j.Progress(kind).Phase
		if phase == retention.PhaseDone {
			return nil
		}
		if j.CancelRequested {
			return retention.ErrCancelled
		}
		spanName := "purge." + phase
		if j.DryRun {
			spanName = "purge.dry_run"
		}
		phaseCtx, endSpan := e.startSpan(ctx, spanName, attribute.String("purge.job_id", id), attribute.String("purge.kind", kind.String()))
		var next string
		switch {
		case j.DryRun:
			err, next = e.dryRun(phaseCtx, j, kind), retention.PhaseDone
		case phase == retention.PhasePlan:
			err, next = e.plan(phaseCtx, j, kind), phaseWork
		case phase == phaseWork:
			err, next = e.awaitTasks(phaseCtx, j, kind), phaseJanitor
		case phase == phaseJanitor:
			err, next = e.janitor(phaseCtx, j, kind), retention.PhaseDone
		default:
			err = fmt.Errorf("%w: phase %q", retention.ErrForeignJob, phase)
		}
		endSpan(err)
		if err != nil {
			return err
		}
		if _, err := e.updateJob(ctx, id, func(j *retention.Job) error {
			j.Progress(kind).Phase = next
			return nil
		}); err != nil {
			return err
		}
	}
}

// awaitTasks waits until every task of the kind is done, adding each done
// task's counts to the job's so watchers see progress. The sum is exact:
// each task fixed its counts before deleting. Tasks are tallied in order,
// from the first not yet tallied, so each wake reads the tasks that ended
// since and one more: the wait's reads grow with the tasks, not with their
// square.
func (e *driver) awaitTasks(ctx context.Context, j *retention.Job, kind images.Kind) error {
	p := j.Progress(kind)
	tallied, counts, tasks := queueState(p).Tallied, p.Counts, queueState(p).Tasks
	if tallied == 0 {
		counts = retention.Counts{DevicesTotal: counts.DevicesTotal}
	}
	for {
		if cur, err := e.env.Job(ctx, j.ID); err != nil {
			return err
		} else if cur.CancelRequested {
			return retention.ErrCancelled
		} else if cur.LostTask != "" {
			return fmt.Errorf("%w: %s", retention.ErrTaskLost, cur.LostTask)
		}
		next, sum := tallied, counts
		err := e.tasks.from(ctx, j.ID, kind, tallied, func(t *task) (bool, error) {
			if !t.Done {
				return false, nil
			}
			c := t.counts()
			c.DevicesTotal = 0 // the plan counted them
			sum.Add(c)
			next++
			return true, nil
		})
		if err != nil {
			return err
		}
		// Write only what changed: this loop polls, and every job write is
		// a synced write that wakes every watcher.
		if next != tallied {
			if _, err := e.updateJob(ctx, j.ID, func(j *retention.Job) error {
				q := j.Progress(kind)
				q.Counts, queueState(q).Tallied = sum, next
				return nil
			}); err != nil {
				return err
			}
			tallied, counts = next, sum
		}
		if tallied >= tasks {
			return nil
		}
		e.wait(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
