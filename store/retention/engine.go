package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// Engine runs purge jobs. Start and the readers work at any time; jobs and
// tasks make progress while Run runs.
type Engine struct {
	opts  Options
	log   *slog.Logger
	jobs  jobStore
	repos map[images.Kind]*images.Repository
	// policies are the retention policies and legal holds.
	policies *Policies
	// outbox is the table of deleted images with Options.Outbox; nil
	// without (outbox.go).
	outbox store.Table
	// driver is the backend's purge design (driver.go).
	driver Driver

	mu     sync.Mutex
	runCtx context.Context
	// running holds the jobs running in this process, each with whether
	// to run it again as its run ends (launchStarted).
	running map[string]bool
	changed chan struct{}
	stats   Stats
	wg      sync.WaitGroup
	tracer  trace.Tracer
	// limiter paces this process's deletes, nil without
	// Options.RowsPerSecond; liveLimiter while Options.Live reports
	// traffic, nil without Options.LiveRowsPerSecond; jobLimiters those of
	// jobs with a cap of their own.
	limiter     *rate.Limiter
	liveLimiter *rate.Limiter
	jobLimiters map[string]*rate.Limiter
	// reserve is reserveN; tests wrap it (CountPacedRows).
	reserve func(l *rate.Limiter, n int) *rate.Reservation
}

// Open opens the engine's tables on the backend.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	if opts.Backend == nil || len(opts.Repositories) == 0 || opts.Driver == nil {
		return nil, errors.New("retention: Options needs a Backend, Repositories and a Driver")
	}
	e := &Engine{opts: opts, log: opts.Logger, repos: map[images.Kind]*images.Repository{},
		running: map[string]bool{}, changed: make(chan struct{}), tracer: opts.TracerProvider.Tracer(tracerName),
		jobLimiters: map[string]*rate.Limiter{}, reserve: reserveN}
	if opts.RowsPerSecond > 0 {
		e.limiter = newRowLimiter(opts.RowsPerSecond)
	}
	if opts.LiveRowsPerSecond > 0 && opts.Live != nil {
		e.liveLimiter = newLiveLimiter(opts.LiveRowsPerSecond)
	}
	for _, r := range opts.Repositories {
		e.repos[r.Kind()] = r
	}
	jobs, err := opts.Backend.Table(ctx, DefaultJobsTable)
	if err != nil {
		return nil, err
	}
	e.jobs = jobStore{table: jobs}
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
	if e.driver, err = opts.Driver(ctx, &Env{e: e}); err != nil {
		return nil, err
	}
	return e, nil
}

// Now is the engine's clock, against which cutoffs are judged.
func (e *Engine) Now() time.Time { return e.opts.Now() }

// Policies are the retention policies and legal holds purges with
// policies apply.
func (e *Engine) Policies() *Policies { return e.policies }

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
	e.driver.Serve(ctx, &e.wg)
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

// launchStarted launches a job Start has just confirmed. A RunOnce that
// listed the job before its confirmation may hold its claim while it finds
// it unconfirmed and leaves it: that run then runs it again as it ends,
// rather than leaving it to the next tick a lease later.
func (e *Engine) launchStarted(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.running[id]; ok {
		e.running[id] = true
		return
	}
	ctx := e.runCtx
	if ctx == nil || ctx.Err() != nil {
		return
	}
	e.running[id] = false
	e.wg.Go(func() { e.runClaimed(ctx, id) })
}

// claim marks a job as running in this process, unless it already is.
func (e *Engine) claim(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.running[id]; ok {
		return false
	}
	e.running[id] = false
	return true
}

// runClaimed runs a job claim marked, again if launchStarted asked while
// it ran, and unmarks it.
func (e *Engine) runClaimed(ctx context.Context, id string) {
	for {
		e.runJob(ctx, id)
		e.mu.Lock()
		again := e.running[id] && ctx.Err() == nil
		if again {
			e.running[id] = false
		} else {
			delete(e.running, id)
		}
		e.mu.Unlock()
		if !again {
			return
		}
	}
}

func (e *Engine) updateJob(ctx context.Context, id string, change func(*Job) error) (*Job, error) {
	j, err := e.jobs.update(ctx, id, change)
	if err == nil {
		e.notify()
	}
	return j, err
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
	case errors.Is(cause, ErrCancelled):
		j.State, j.Error = Cancelled, "cancelled on request; the next purge deletes what it left"
	case errors.As(cause, &running):
		j.State, j.Error = Failed, fmt.Sprintf("purge %s of %s images was already running", running.JobID, running.Kind)
	case errors.Is(cause, ErrForeignJob):
		j.State, j.Error = Failed, "recorded by an earlier release or by the other backend's purge, which this engine does not resume; start the purge again"
	case errors.Is(cause, ErrTaskLost):
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
	if err := e.driver.SealJobOutbox(ctx, id); err != nil {
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
	if errors.Is(err, ErrLeaseLost) {
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
	// The job holds its final counts; its driver's state of it (the
	// queue design's tasks, one per queue.Options.GroupSize cameras) would
	// otherwise pile up forever.
	if err := e.driver.DropJob(ctx, id); err != nil {
		e.log.Warn("purge: deleting the driver's state of an ended job failed", "job", id, "err", err)
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
