package retention

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/time/rate"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention/policy"
	"github.com/metadatad/metadatad/store/tablequeue"
)

// Default tables of the engine's own state.
const (
	DefaultJobsTable  = "PurgeJobs"
	DefaultTasksTable = "PurgeTasks"
	DefaultQueueTable = "PurgeQueue"
)

// Queue is the work queue the engine fans tasks through: at-least-once, with
// a visibility timeout. *tablequeue.Queue implements it on a store table.
type Queue interface {
	Send(ctx context.Context, body []byte) error
	Receive(ctx context.Context, max int, visibility time.Duration) ([]tablequeue.Message, error)
	// Extend hides a received message for visibility from now and returns
	// it with its new receipt; tablequeue.ErrLostMessage if another receiver has it.
	Extend(ctx context.Context, m tablequeue.Message, visibility time.Duration) (tablequeue.Message, error)
	Delete(ctx context.Context, m tablequeue.Message) error
	DeadLetter(ctx context.Context, m tablequeue.Message) error
}

// Options configures Open. Zero fields take the documented defaults.
type Options struct {
	// Backend holds the engine's jobs, tasks and, without Queue, its queue. Required.
	Backend store.Backend
	// Repositories are the image repositories the engine purges, one per kind. Required.
	Repositories []*images.Repository
	// Queue carries tasks to workers; nil means a queue in the table DefaultQueueTable.
	Queue Queue
	// Now is the clock for cutoffs and job times; nil means time.Now.
	Now func() time.Time
	// Logger gets job starts, ends and totals; nil means slog.Default.
	Logger *slog.Logger
	// The options from Workers to CameraMemory tune the queue design, the
	// engine of a backend that is not a store.Purger (Azure); the embedded
	// store's purge has no tasks, queue or janitor (see embedded.go).

	// Workers is how many tasks run at once in this process; default 4.
	Workers int
	// GroupSize is how many cameras one task deletes; default 500. Each
	// task costs a few synced bookkeeping writes (its record twice, its
	// queue message, the job's totals), so larger groups keep a fleet of
	// many cameras with little expired data each from paying per camera.
	GroupSize int
	// VisibilityTimeout hides a task being worked on; default 2 minutes. A
	// worker extends it every third of it while the task runs, so only a
	// worker that stopped (crashed, or cut off from the queue) loses its task.
	VisibilityTimeout time.Duration
	// MaxAttempts is how many deliveries a task gets before its failing
	// cameras (their count, hold read or delete) are counted failed, or,
	// if its own record cannot be written, its job fails; default 5.
	MaxAttempts int
	// PollInterval is how often idle workers and waiting jobs look for work
	// another process may have made; default 250 ms.
	PollInterval time.Duration
	// CameraMemory bounds the camera ids a purge holds at once, in bytes,
	// counted as cameraBytes does: planning splits the expired cameras into
	// as many buckets, one index scan each, as it takes for one bucket's to
	// fit. Default 8 MiB, about 100,000 cameras.
	CameraMemory int
	// ReplicaID names this engine among the engines sharing the store;
	// default a random id.
	ReplicaID string
	// LeaseDuration is how long a job stays with the engine running it
	// without a renewal: after a crash, another engine takes it over this
	// long after the last renewal. Default 30 seconds.
	LeaseDuration time.Duration
	// TracerProvider traces jobs, their phases and tasks; nil means none.
	TracerProvider trace.TracerProvider
	// RowsPerSecond caps the rows this process's purges delete per second,
	// all jobs together, primary and index rows alike; 0 means no cap. A
	// job may set a lower cap of its own (StartRequest.RowsPerSecond).
	RowsPerSecond float64
	// LiveRowsPerSecond caps the rows this process's purges delete per
	// second while Live reports that requests are being served, so that a
	// purge yields to live traffic and runs at full speed on an idle store;
	// 0 means no such cap. It binds with RowsPerSecond and a job's own cap:
	// the lowest in force paces. Without Live it never binds.
	LiveRowsPerSecond float64
	// Live reports whether the process is serving requests now (the
	// server's record of its calls); asked before each step of a purge.
	Live func() bool
	// SectionCameras is how many cameras one exclusive batch of an
	// embedded purge deletes (see embedded.go); creates wait for one such
	// batch at most. Default 10,000.
	SectionCameras int
	// JobRetention is how long the record of an ended job is kept: Run
	// retires older ones at its start and hourly (see RetireJobs). Default
	// DefaultJobRetention, 30 days. The outbox's rows are kept as long.
	JobRetention time.Duration
	// Outbox makes purges keep the outbox of the images they delete, for
	// the blob side: an embedded purge's sections then read the rows they
	// delete (outbox.go); on the queue design each delete batch writes its
	// outbox rows before and after it (outboxseal.go).
	Outbox bool
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.GroupSize <= 0 {
		o.GroupSize = defaultGroupSize
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = 2 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	if o.CameraMemory <= 0 {
		o.CameraMemory = 8 << 20
	}
	if o.ReplicaID == "" {
		var id [6]byte
		_, _ = rand.Read(id[:])
		o.ReplicaID = hex.EncodeToString(id[:])
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 30 * time.Second
	}
	if o.TracerProvider == nil {
		o.TracerProvider = noop.NewTracerProvider()
	}
	if o.SectionCameras <= 0 {
		o.SectionCameras = sectionCameras
	}
	if o.JobRetention <= 0 {
		o.JobRetention = DefaultJobRetention
	}
	return o
}

// Errors of Start.
var (
	// ErrNoKinds reports a purge of no image kind.
	ErrNoKinds = errors.New("retention: no image kind to purge")
	// ErrFutureCutoff reports a cutoff after now.
	ErrFutureCutoff = errors.New("retention: cutoff is in the future")
)

// Engine runs purge jobs. Start and the readers work at any time; jobs and
// tasks make progress while Run runs.
type Engine struct {
	opts  Options
	log   *slog.Logger
	jobs  jobStore
	tasks taskStore
	queue Queue
	repos map[images.Kind]*images.Repository
	// policies are the retention policies and legal holds.
	policies *Policies
	// budget is the storage budget's state, when one runs (budget.go).
	budget budgetRun
	// outbox is the table of deleted images with Options.Outbox; nil
	// without (outbox.go).
	outbox store.Table
	// purger is the backend as a store.Purger, nil on one that is not: the
	// embedded store, whose purges run without the queue (embedded.go).
	purger store.Purger

	mu      sync.Mutex
	runCtx  context.Context
	running map[string]bool
	changed chan struct{}
	stats   Stats
	wg      sync.WaitGroup
	tracer  trace.Tracer
	// janitorHook, set by tests only, runs as a janitor pass begins.
	janitorHook func(job string, kind images.Kind)
	// deleteHook, set by tests only, runs between a queue design's delete
	// batch's pending outbox write and its delete, given the batch's rows.
	deleteHook func(job string, rows []store.Entity)
	// settleHook, set by tests only, runs in each pass of a cancel's
	// settling once the pass has read its tasks, before it visits them.
	settleHook func(job string, kind images.Kind)
	// limiter paces this process's deletes, nil without
	// Options.RowsPerSecond; liveLimiter while Options.Live reports
	// traffic, nil without Options.LiveRowsPerSecond; jobLimiters those of
	// jobs with a cap of their own.
	limiter     *rate.Limiter
	liveLimiter *rate.Limiter
	jobLimiters map[string]*rate.Limiter
	// reserve is reserveN; tests wrap it (CountPacedRows).
	reserve func(l *rate.Limiter, n int) *rate.Reservation
	// working holds the tasks this process's workers are running (see
	// beginTask), under mu.
	working map[taskMessage]string
}

// Open opens the engine's tables on the backend.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	if opts.Backend == nil || len(opts.Repositories) == 0 {
		return nil, errors.New("retention: Options needs a Backend and Repositories")
	}
	e := &Engine{opts: opts, log: opts.Logger, repos: map[images.Kind]*images.Repository{},
		running: map[string]bool{}, changed: make(chan struct{}), tracer: opts.TracerProvider.Tracer(tracerName),
		jobLimiters: map[string]*rate.Limiter{}, reserve: reserveN, working: map[taskMessage]string{}}
	if opts.RowsPerSecond > 0 {
		e.limiter = newRowLimiter(opts.RowsPerSecond)
	}
	if opts.LiveRowsPerSecond > 0 && opts.Live != nil {
		e.liveLimiter = newLiveLimiter(opts.LiveRowsPerSecond)
	}
	for _, r := range opts.Repositories {
		e.repos[r.Kind()] = r
	}
	if p, ok := opts.Backend.(store.Purger); ok {
		e.purger = p
		for _, r := range opts.Repositories {
			primary, index := r.Tables()
			if err := p.MinuteKeyed(ctx, index); err != nil {
				return nil, err
			}
			err := p.Tally(ctx, primary)
			if errors.Is(err, store.ErrCorrupt) {
				// A damaged file fails only the reads of its keys: the rest
				// serves, and this kind's purges fail until it is restored.
				opts.Logger.Error("purge: the tally of a table cannot be read; its purges fail until the damaged file is restored",
					"table", primary.Name(), "err", err)
				continue
			}
			if err != nil {
				return nil, err
			}
		}
	}
	jobs, err := opts.Backend.Table(ctx, DefaultJobsTable)
	if err != nil {
		return nil, err
	}
	tasks, err := opts.Backend.Table(ctx, DefaultTasksTable)
	if err != nil {
		return nil, err
	}
	e.jobs, e.tasks = jobStore{table: jobs}, taskStore{table: tasks}
	policies, err := opts.Backend.Table(ctx, DefaultPoliciesTable)
	if err != nil {
		return nil, err
	}
	holds, err := opts.Backend.Table(ctx, DefaultHoldsTable)
	if err != nil {
		return nil, err
	}
	e.policies = &Policies{policies: policies, holds: holds, now: opts.Now}
	if opts.Outbox {
		if e.outbox, err = opts.Backend.Table(ctx, DefaultOutboxTable); err != nil {
			return nil, err
		}
	}
	e.queue = opts.Queue
	if e.queue == nil && e.purger == nil { // the embedded store purges without one
		q, err := opts.Backend.Table(ctx, DefaultQueueTable)
		if err != nil {
			return nil, err
		}
		e.queue = tablequeue.Open(q, tablequeue.Options{Now: opts.Now})
	}
	return e, nil
}

// Now is the engine's clock, against which cutoffs are judged.
func (e *Engine) Now() time.Time { return e.opts.Now() }

// Policies are the retention policies and legal holds purges with
// policies apply.
func (e *Engine) Policies() *Policies { return e.policies }

// StartRequest describes a purge.
type StartRequest struct {
	// Kinds to purge; each once, none repeated.
	Kinds []images.Kind
	// Cutoff retires rows captured before the start of its minute; not
	// after Now. Ignored with UsePolicies.
	Cutoff time.Time
	// UsePolicies gives each camera the cutoff of its retention policy
	// (now less its days); kinds that no policy sets a retention for are
	// left out of the job, and a job left with no kind fails with
	// ErrNoPolicies. Every purge, with policies or by Cutoff, spares the
	// cameras on legal hold.
	UsePolicies bool
	// DryRun counts without deleting.
	DryRun bool
	// RowsPerSecond caps the rows the job deletes per second in each
	// process working on it, not across processes; Options.RowsPerSecond
	// applies too, and the lower binds. 0 means no cap of its own.
	RowsPerSecond float64
}

// Start records a new job and sets it running in the background. A purge
// that overlaps a running one fails with a *RunningError; a dry run deletes
// nothing and overlaps nothing.
func (e *Engine) Start(ctx context.Context, req StartRequest) (*Job, error) {
	if len(req.Kinds) == 0 {
		return nil, ErrNoKinds
	}
	now := e.opts.Now().UTC()
	if req.Cutoff.After(now) && !req.UsePolicies {
		return nil, fmt.Errorf("%w: %s is after %s", ErrFutureCutoff, req.Cutoff.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	j := &Job{ID: newJobID(now), Cutoff: req.Cutoff.UTC(), DryRun: req.DryRun, State: Pending, Created: now, Unconfirmed: true,
		RowsPerSecond: max(0, req.RowsPerSecond), UsePolicies: req.UsePolicies,
		Outbox: e.outbox != nil && e.purger == nil && !req.DryRun}
	var reaches policy.Reaches
	if req.UsePolicies {
		var err error
		if reaches, err = e.policies.reaches(ctx); err != nil {
			return nil, err
		}
		j.Cutoff = time.Time{}
	}
	for _, k := range req.Kinds {
		if _, ok := e.repos[k]; !ok {
			return nil, fmt.Errorf("retention: no repository for kind %s", k)
		}
		if j.progress(k) != nil {
			continue
		}
		p := &KindProgress{Kind: k, Phase: phasePlan}
		if req.UsePolicies {
			rch, ok := reaches[k]
			if !ok {
				continue
			}
			if rch.Days > 0 {
				p.Cutoff = now.Add(-policy.Days(rch.Days))
				if p.Cutoff.After(j.Cutoff) {
					j.Cutoff = p.Cutoff
				}
			}
			if rch.ThinAfter > 0 {
				p.ThinThrough = now.Add(-policy.Days(rch.ThinAfter))
			}
		}
		j.Kinds = append(j.Kinds, p)
	}
	if len(j.Kinds) == 0 {
		return nil, ErrNoPolicies
	}
	// The job is recorded unconfirmed, so that it never runs unless this
	// Start reaches its last write, whatever happens before: the caller
	// going away, a store error, a crash. The writes run on their own
	// deadline, not the caller's: a caller cancelling halfway must not leave
	// the cleanup unable to run.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	err := e.start(wctx, ctx, j)
	if err != nil {
		if derr := errors.Join(e.jobs.remove(wctx, j.ID), e.closeJobOutbox(wctx, j)); derr != nil {
			e.log.Warn("purge: removing a job that could not start failed; it never runs and ends failed later",
				"job", j.ID, "err", derr)
		}
		return nil, err
	}
	e.notify()
	e.launch(j.ID)
	return j, nil
}

// startTimeout bounds Start's writes; an unconfirmed job older than
// abandonAfter was left by a Start that will never confirm it.
const (
	startTimeout = 30 * time.Second
	abandonAfter = 2 * startTimeout
)

// start records j, takes its locks and confirms it. A caller gone before
// the confirmation fails the start; after it, the job is started for good.
func (e *Engine) start(ctx, caller context.Context, j *Job) error {
	if err := e.jobs.create(ctx, j); err != nil {
		return err
	}
	if !j.DryRun {
		if err := e.jobs.lock(ctx, j); err != nil {
			return err
		}
	}
	if err := e.openJobOutbox(ctx, j); err != nil {
		return err
	}
	if err := caller.Err(); err != nil {
		return err
	}
	_, err := e.jobs.update(ctx, j.ID, func(j *Job) error {
		j.Unconfirmed = false
		return nil
	})
	j.Unconfirmed = err != nil
	return err
}

// Get returns one job; store.ErrNotFound for an unknown id.
func (e *Engine) Get(ctx context.Context, id string) (*Job, error) {
	j, _, err := e.jobs.get(ctx, id)
	return j, err
}

// List returns a page of jobs, newest first, and the cursor of the next.
func (e *Engine) List(ctx context.Context, limit int, resume *store.Cursor) ([]*Job, *store.Cursor, error) {
	return e.jobs.list(ctx, "", limit, resume)
}

// ListInState is List of the jobs in one state only.
func (e *Engine) ListInState(ctx context.Context, state State, limit int, resume *store.Cursor) ([]*Job, *store.Cursor, error) {
	return e.jobs.list(ctx, state, limit, resume)
}

// Changed returns a channel closed at the next change this process makes to
// a job or task. Watchers of jobs that other processes run poll as well.
func (e *Engine) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

func (e *Engine) notify() {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.changed)
	e.changed = make(chan struct{})
}

// Run resumes the jobs a previous run left unfinished, runs new ones,
// works on tasks and retires old job records (RetireJobs) until ctx ends,
// then waits for its goroutines. Jobs cut
// short stay running in the store: this engine resumes them at its next
// Run, or another engine sharing the store once their lease runs out.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	e.runCtx = ctx
	e.mu.Unlock()
	if e.purger == nil {
		// The embedded store's purges need no queue and no workers.
		for range e.opts.Workers {
			e.wg.Go(func() { e.work(ctx) })
		}
	}
	if _, err := e.RunOnce(ctx); err != nil && ctx.Err() == nil {
		e.log.Warn("purge: looking for unfinished jobs failed; retrying", "err", err)
	}
	e.retireOldJobs(ctx)
	ticker := time.NewTicker(e.opts.LeaseDuration)
	defer ticker.Stop()
	retire := time.NewTicker(retireInterval)
	defer retire.Stop()
	for {
		select {
		case <-ctx.Done():
			e.wg.Wait()
			return nil
		case <-ticker.C:
			if _, err := e.RunOnce(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("purge: looking for unfinished jobs failed", "err", err)
			}
		case <-retire.C:
			e.retireOldJobs(ctx)
		}
	}
}

// RunOnce is one step of Run: it launches every unfinished job not running
// in this process (runJob leaves one another engine holds a live lease on
// to it) and frees the limiters of ended jobs; it returns how many jobs it
// launched. Under Run the jobs run in the background, as Run's own; without
// Run, RunOnce runs them to their end, or their lease's, before it returns,
// so that a test steps the engine instead of waiting on it.
func (e *Engine) RunOnce(ctx context.Context) (int, error) {
	unfinished, err := e.jobs.unfinished(ctx, e.opts.Now())
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	underRun := e.runCtx != nil && e.runCtx.Err() == nil
	e.mu.Unlock()
	var stepped sync.WaitGroup
	n := 0
	for _, j := range unfinished {
		if underRun {
			if e.launch(j.ID) {
				n++
			}
			continue
		}
		if e.claim(j.ID) {
			n++
			stepped.Go(func() { e.runClaimed(ctx, j.ID) })
		}
	}
	stepped.Wait()
	e.forgetEndedLimiters(ctx)
	return n, nil
}

// launch runs a job in the background, once per process, if Run is
// running; it reports whether it did.
func (e *Engine) launch(id string) bool {
	e.mu.Lock()
	ctx := e.runCtx
	e.mu.Unlock()
	if ctx == nil || ctx.Err() != nil || !e.claim(id) {
		return false
	}
	e.wg.Go(func() { e.runClaimed(ctx, id) })
	return true
}

// claim marks a job as running in this process, unless it already is.
func (e *Engine) claim(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[id] {
		return false
	}
	e.running[id] = true
	return true
}

// runClaimed runs a job claim marked, and unmarks it.
func (e *Engine) runClaimed(ctx context.Context, id string) {
	e.runJob(ctx, id)
	e.mu.Lock()
	delete(e.running, id)
	e.mu.Unlock()
}

func (e *Engine) updateJob(ctx context.Context, id string, change func(*Job) error) (*Job, error) {
	j, err := e.jobs.update(ctx, id, change)
	if err == nil {
		e.notify()
	}
	return j, err
}

// runKind takes one kind through plan, work and janitor, from wherever a
// previous run left it.
func (e *Engine) runKind(ctx context.Context, id string, kind images.Kind) error {
	if e.purger != nil {
		return e.purgeEmbedded(ctx, id, kind)
	}
	for {
		j, _, err := e.jobs.get(ctx, id)
		if err != nil {
			return err
		}
		phase := j.progress(kind).Phase
		if phase == phaseDone {
			return nil
		}
		if j.CancelRequested {
			return errCancelled
		}
		spanName := "purge." + phase
		if j.DryRun {
			spanName = "purge.dry_run"
		}
		phaseCtx, endSpan := e.startSpan(ctx, spanName, attribute.String("purge.job_id", id), attribute.String("purge.kind", kind.String()))
		var next string
		switch {
		case j.DryRun:
			err, next = e.dryRun(phaseCtx, j, kind), phaseDone
		case phase == phasePlan:
			err, next = e.plan(phaseCtx, j, kind), phaseWork
		case phase == phaseWork:
			err, next = e.awaitTasks(phaseCtx, j, kind), phaseJanitor
		case phase == phaseJanitor || phase == phaseSweep:
			err, next = e.janitor(phaseCtx, j, kind), phaseDone
		}
		endSpan(err)
		if err != nil {
			return err
		}
		if _, err := e.updateJob(ctx, id, func(j *Job) error {
			j.progress(kind).Phase = next
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
	p := j.progress(kind)
	tallied, counts, tasks := p.Tallied, p.Counts, p.Tasks
	if tallied == 0 {
		counts = Counts{DevicesTotal: counts.DevicesTotal}
	}
	if tasks == 0 {
		// A job planned before the plan recorded its tasks.
		if err := e.tasks.each(ctx, j.ID, kind, func(*task) error { tasks++; return nil }); err != nil {
			return err
		}
	}
	for {
		if cur, _, err := e.jobs.get(ctx, j.ID); err != nil {
			return err
		} else if cur.CancelRequested {
			return errCancelled
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
			sum.add(c)
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
				q := j.progress(kind)
				q.Counts, q.Tallied = sum, next
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

// errEnded stops finish for a job that has ended already: the last
// section of an embedded purge ends it in its own batch.
var errEnded = errors.New("retention: job ended already")

// end sets j's end: its state and message from cause and its counts.
func (e *Engine) end(j *Job, cause error) {
	j.Ended = e.opts.Now().UTC()
	totals := j.Totals()
	var running *RunningError
	switch {
	case errors.Is(cause, errCancelled):
		j.State, j.Error = Cancelled, "cancelled on request; the next purge deletes what it left"
	case errors.As(cause, &running):
		j.State, j.Error = Failed, fmt.Sprintf("purge %s of %s images was already running", running.JobID, running.Kind)
	case errors.Is(cause, errTaskLost):
		j.State, j.Error = Failed, "a task could not be recorded; see the server log; the next purge retries its cameras"
	case cause != nil:
		j.State, j.Error = Failed, "storage error; see the server log"
	case totals.DevicesFailed > 0:
		j.State, j.Error = Failed, fmt.Sprintf("%d cameras could not be purged; the next purge retries them", totals.DevicesFailed)
	default:
		j.State = Succeeded
	}
}

// finish ends a job: failed with cause, or by its counts.
func (e *Engine) finish(ctx context.Context, id string, cause error) {
	// The outbox is sealed before the end is recorded: a job that ends
	// has a sealed outbox, and one whose seal failed is resumed, to try
	// again.
	if err := e.sealJobOutbox(ctx, id); err != nil {
		if ctx.Err() == nil {
			e.log.Error("purge: cannot seal the outbox of deleted images of an ending job; it is retried", "job", id, "err", err)
		}
		return
	}
	// The stats count the job before watchers are woken to its end.
	j, err := e.jobs.update(ctx, id, func(j *Job) error {
		if j.State.Terminal() {
			return errEnded
		}
		e.end(j, cause)
		return nil
	})
	endedBefore := errors.Is(err, errEnded)
	if endedBefore { // by its last section, with its marker
		j, _, err = e.jobs.get(ctx, id)
	}
	if errors.Is(err, errLeaseLost) {
		e.leaseEnded(ctx, id, err)
		return
	}
	if err != nil {
		e.log.Error("purge: cannot record the end of a job", "job", id, "err", err, "cause", cause)
		return
	}
	e.countEnded(j)
	e.forgetLimiter(id)
	e.notify()
	if !endedBefore {
		e.dropMarker(ctx, id)
	}
	// The job holds its final counts; its tasks (one per GroupSize cameras,
	// every purge) would otherwise pile up forever.
	if err := e.tasks.deleteAll(ctx, id); err != nil {
		e.log.Warn("purge: deleting the tasks of an ended job failed", "job", id, "err", err)
	}
	t := j.Totals()
	attrs := []any{"job", id, "state", string(j.State), "dry_run", j.DryRun, "devices_total", t.DevicesTotal,
		"devices_done", t.DevicesDone, "devices_failed", t.DevicesFailed,
		"metadata_rows_deleted", t.MetadataRows, "index_rows_deleted", t.IndexRows, "duration", j.Ended.Sub(j.Started)}
	if j.State == Cancelled {
		e.log.Info("purge cancelled", attrs...)
		return
	}
	if cause != nil {
		e.log.Error("purge failed", append(attrs, "err", cause)...)
		return
	}
	e.log.Info("purge finished", attrs...)
}

// Kinds lists the kinds the engine can purge, in the order of images.Kinds.
func (e *Engine) Kinds() []images.Kind {
	var out []images.Kind
	for _, k := range images.Kinds {
		if _, ok := e.repos[k]; ok {
			out = append(out, k)
		}
	}
	return slices.Clip(out)
}
