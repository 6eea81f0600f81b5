package retention

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/metadatad/metadatad/store/images"
)

// queueDriver is the queue design (plan.go, work.go, janitor.go,
// outboxseal.go): the seeds' design, for a backend with no transaction
// across partitions (Azure). Its tasks go through Engine.queue to the
// workers of every replica.
type queueDriver struct{ e *Engine }

// queueProgress is a kind's progress in the queue design, kept in the
// job's record (KindProgress.queue).
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
	// Tallied is how many tasks, from the first, are done and in Counts.
	Tallied int `json:"tallied,omitempty"`
}

// Phases of the queue design, between PhasePlan and PhaseDone.
const (
	phaseWork = "work"
	// phaseJanitor: the kind's tasks are done; its orphaned index rows go
	// (see janitor.go).
	phaseJanitor = "janitor"
)

// queueState is the kind's queueProgress in the job's record.
func queueState(p *KindProgress) *queueProgress { return DriverState[queueProgress](p) }

func (d *queueDriver) Name() string { return "queue" }

// Serve runs Options.Workers workers, which take tasks of any job.
func (d *queueDriver) Serve(ctx context.Context, wg *sync.WaitGroup) {
	for range d.e.opts.Workers {
		wg.Go(func() { d.e.work(ctx) })
	}
}

// BeginJob guards the job's tasks with its lease: from here a task's write
// holds only under it (owner.go).
func (d *queueDriver) BeginJob(ctx context.Context, id string) error {
	held, ok := heldLease(ctx, id)
	if !ok {
		return fmt.Errorf("%w: job %s begins without its lease", ErrLeaseLost, id)
	}
	return d.e.tasks.takeTasks(ctx, held)
}

func (d *queueDriver) JobKeepsOutbox(dryRun bool) bool { return !dryRun }

func (d *queueDriver) SealJobOutbox(ctx context.Context, id string) error {
	return d.e.sealJobOutbox(ctx, id)
}

func (d *queueDriver) DeletedImages(ctx context.Context, after string, limit int) ([]DeletedImage, error) {
	return d.e.sealedImages(ctx, after, limit)
}

func (d *queueDriver) CheckResumeToken(tok string) error {
	_, err := parseSealToken(tok)
	return err
}

func (d *queueDriver) RetireOutbox(ctx context.Context, cutoff time.Time) (int, error) {
	return d.e.retireSeals(ctx, cutoff)
}

// MarkOutboxRestored does nothing: the queue design's store (Azure) is
// restored by no command of this service.
func (d *queueDriver) MarkOutboxRestored(context.Context) error { return nil }

func (d *queueDriver) SettleCancelled(ctx context.Context, id string, kind images.Kind) error {
	return d.e.settleCancelled(ctx, id, kind)
}

// PurgeKind takes one kind through plan, work and janitor, from wherever
// a previous run left it.
func (d *queueDriver) PurgeKind(ctx context.Context, id string, kind images.Kind) error {
	e := d.e
	for {
		j, _, err := e.jobs.get(ctx, id)
		if err != nil {
			return err
		}
		phase := j.Progress(kind).Phase
		if phase == PhaseDone {
			return nil
		}
		if j.CancelRequested {
			return ErrCancelled
		}
		spanName := "purge." + phase
		if j.DryRun {
			spanName = "purge.dry_run"
		}
		phaseCtx, endSpan := e.startSpan(ctx, spanName, attribute.String("purge.job_id", id), attribute.String("purge.kind", kind.String()))
		var next string
		switch {
		case j.DryRun:
			err, next = e.dryRun(phaseCtx, j, kind), PhaseDone
		case phase == PhasePlan:
			err, next = e.plan(phaseCtx, j, kind), phaseWork
		case phase == phaseWork:
			err, next = e.awaitTasks(phaseCtx, j, kind), phaseJanitor
		case phase == phaseJanitor:
			err, next = e.janitor(phaseCtx, j, kind), PhaseDone
		default:
			err = fmt.Errorf("%w: phase %q", ErrForeignJob, phase)
		}
		endSpan(err)
		if err != nil {
			return err
		}
		if _, err := e.updateJob(ctx, id, func(j *Job) error {
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
func (e *Engine) awaitTasks(ctx context.Context, j *Job, kind images.Kind) error {
	p := j.Progress(kind)
	tallied, counts, tasks := queueState(p).Tallied, p.Counts, queueState(p).Tasks
	if tallied == 0 {
		counts = Counts{DevicesTotal: counts.DevicesTotal}
	}
	for {
		if cur, _, err := e.jobs.get(ctx, j.ID); err != nil {
			return err
		} else if cur.CancelRequested {
			return ErrCancelled
		} else if cur.LostTask != "" {
			return fmt.Errorf("%w: %s", errTaskLost, cur.LostTask)
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
			if _, err := e.updateJob(ctx, j.ID, func(j *Job) error {
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
