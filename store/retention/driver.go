package retention

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// A Driver is one backend's purge design. The engine keeps what both
// designs share (jobs and their store, leases, cancels, the schedule,
// retirement, pacing, statistics, policies and holds) and asks its driver
// for the rest: the embedded store's sections (store/retention/embedded),
// or the queue design (queue.go) on a backend with neither range deletions
// nor atomic batches across partitions (Azure). Options.Driver picks it.
type Driver interface {
	// Name is recorded on every job the engine starts (Job.Driver). A job
	// recorded under another name, by an earlier release or by the other
	// design, is not resumed but ends failed, to be started again: its
	// progress means nothing to this driver (ErrForeignJob).
	Name() string
	// Serve starts on wg what the design runs beside its jobs while Run
	// runs, until ctx ends: the queue design's workers.
	Serve(ctx context.Context, wg *sync.WaitGroup)
	// BeginJob readies a job's run before its first kind, under the lease
	// ctx carries: the queue design guards its tasks' writes with it.
	BeginJob(ctx context.Context, id string) error
	// PurgeKind takes one kind of a job from wherever a previous run left
	// it to its end, PhaseDone, with what it deleted counted in the job's
	// record by then, whatever the ending. It returns ErrCancelled once the
	// job is cancelled, ErrLeaseLost once another engine took the job over.
	PurgeKind(ctx context.Context, id string, kind images.Kind) error
	// SettleCancelled brings a cancelled job's kind's counts to all that
	// its deletes took, before the job ends Cancelled.
	SettleCancelled(ctx context.Context, id string, kind images.Kind) error
	// StartJob records what a new job needs of the driver before it is
	// confirmed (the queue design's outbox of the job); AbandonStart undoes
	// it for a job whose start failed.
	StartJob(ctx context.Context, j *Job) error
	AbandonStart(ctx context.Context, j *Job) error
	// DropJob deletes the driver's state of an ended job (the queue
	// design's tasks), at its end and again when its record is retired.
	DropJob(ctx context.Context, id string) error
	// Retire deletes the driver's own records older than horizon (the
	// queue design's dead letters), as the engine retires old jobs.
	Retire(ctx context.Context, horizon time.Time) error

	// The outbox of deleted images (Options.Outbox): each design records
	// every image it deletes exactly once, in its own way, and the engine
	// reads them back through these.

	// JobKeepsOutbox says whether a new job keeps an outbox of its own
	// (Job.Outbox), which the engine opens at its start and the driver
	// seals at its end.
	JobKeepsOutbox(dryRun bool) bool
	// SealJobOutbox closes an ending job's outbox for the readers; a
	// failure leaves the job running, to be ended again.
	SealJobOutbox(ctx context.Context, id string) error
	// DeletedImages reads the outbox after a resume token, in order. It
	// gives out only records a crash cannot take back, since its reader
	// acts on them at once (the blob deleter deletes their blobs): on a
	// store that shows a write before it is synced, it waits for the sync.
	DeletedImages(ctx context.Context, after string, limit int) ([]DeletedImage, error)
	// CheckResumeToken reports whether tok could be one of this outbox's
	// tokens: ErrBadResumeToken if not.
	CheckResumeToken(tok string) error
	// RetireOutbox deletes the records of deletions before cutoff.
	RetireOutbox(ctx context.Context, cutoff time.Time) (int, error)
	// MarkOutboxRestored records that a restore took the store back to a
	// backup (see Engine.MarkOutboxRestored).
	MarkOutboxRestored(ctx context.Context) error
}

// NewDriver makes an engine's driver once the engine has opened its
// tables: Options.Driver.
type NewDriver func(ctx context.Context, env *Env) (Driver, error)

// Env is what the engine gives its driver: its options and tables, the
// job records, the pacing and the rules of each camera.
type Env struct{ e *Engine }

// Options are the engine's, defaults filled in.
func (v *Env) Options() Options { return v.e.opts }

// Logger is the engine's logger.
func (v *Env) Logger() *slog.Logger { return v.e.log }

// Repository is the image repository of a kind the engine purges.
func (v *Env) Repository(kind images.Kind) *images.Repository { return v.e.repos[kind] }

// Outbox is the table of deleted images, nil without Options.Outbox.
func (v *Env) Outbox() store.Table { return v.e.outbox }

// Job reads a job's record.
func (v *Env) Job(ctx context.Context, id string) (*Job, error) {
	j, _, err := v.e.jobs.get(ctx, id)
	return j, err
}

// UpdateJobStamped is UpdateJob that also returns the backend's clock at
// the write, read from the stored row's timestamp.
func (v *Env) UpdateJobStamped(ctx context.Context, id string, change func(*Job) error) (*Job, time.Time, error) {
	j, at, err := v.e.jobs.updateStamped(ctx, id, change)
	if err == nil {
		v.e.notify()
	}
	return j, at, err
}

// Changed is Engine.Changed: closed at the next change this process makes
// to a job.
func (v *Env) Changed() <-chan struct{} { return v.e.Changed() }

// Pace waits until the job's pace admits rows more.
func (v *Env) Pace(ctx context.Context, j *Job, rows int64) error { return v.e.pace(ctx, j, rows) }

// Holds are the cameras on legal hold as they stand now.
func (v *Env) Holds(ctx context.Context) (policy.HoldSet, error) { return v.e.policies.holdSet(ctx) }

// UpdateJob changes a job's record, under the lease ctx carries, and wakes
// the job's watchers.
func (v *Env) UpdateJob(ctx context.Context, id string, change func(*Job) error) (*Job, error) {
	return v.e.updateJob(ctx, id, change)
}

// JobRecord is j's record as a row of the table it is kept in, for a
// driver that writes it in a batch of its own (store.PurgeBatch.Put), so
// that the job's progress commits with the deletes it counts. It is
// refused (ErrLeaseLost) unless the lease ctx carries still holds j.
func (v *Env) JobRecord(ctx context.Context, j *Job) (table string, row store.Entity, err error) {
	if err := checkLease(ctx, j); err != nil {
		return "", store.Entity{}, err
	}
	row, err = jobEntity(j)
	return v.e.jobs.table.Name(), row, err
}

// RunningMarker is the row that lists a job among the running ones: a
// driver that ends a job in its own batch (End, JobRecord) deletes it
// there too.
func (v *Env) RunningMarker(id string) (table string, key store.Key) {
	return v.e.jobs.table.Name(), store.Key{PartitionKey: activePartition, RowKey: id}
}

// CountDeleted counts in the engine's statistics what a driver's own
// batch (JobRecord) deleted of kind, once it has committed.
func (v *Env) CountDeleted(kind images.Kind, deleted Counts) { v.e.countDeleted(kind, deleted) }

// Notify wakes the watchers of jobs to a change a driver's own batch
// (JobRecord) committed; not to a job's end, which the engine counts in
// its statistics first, then wakes them to.
func (v *Env) Notify() { v.e.notify() }

// End sets j's end from cause and its counts, as the engine would end it:
// for a driver whose last write of a job is its own (JobRecord).
func (v *Env) End(j *Job, cause error) { v.e.end(j, cause) }

// PaceStep is how many rows a job may delete in one step at its pace now
// (math.MaxInt64 unpaced).
func (v *Env) PaceStep(j *Job) int64 { return v.e.paceStep(j) }

// PaceUntilCancel waits until the job's pace admits rows more, returning
// ErrCancelled if the job is cancelled meanwhile.
func (v *Env) PaceUntilCancel(ctx context.Context, j *Job, rows int64) error {
	return v.e.paceUntilCancel(ctx, j, rows)
}

// Rules are the rules of one kind of j for each camera, with the legal
// holds as they stand now.
func (v *Env) Rules(ctx context.Context, j *Job, kind images.Kind) (*Rules, error) {
	return v.e.rules(ctx, j, kind)
}

// StartSpan starts a span of the engine's tracer; end ends it with err.
func (v *Env) StartSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	return v.e.startSpan(ctx, name, attrs...)
}

// Resolve is camera's rule in this kind of the job, given the capture of
// its oldest row: its boundary, thinning windows and hold.
func (r *Rules) Resolve(ctx context.Context, camera string, oldest time.Time) (policy.CameraRule, error) {
	return r.resolve(ctx, camera, oldest)
}

// RefreshHolds reads the legal holds again: a hold placed since spares
// every camera resolved from now on.
func (r *Rules) RefreshHolds(ctx context.Context) error { return r.refreshHolds(ctx) }

// Holds is how many cameras are on legal hold, as last read.
func (r *Rules) Holds() int { return len(r.holds) }
