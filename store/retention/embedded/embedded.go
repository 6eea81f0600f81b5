package embedded

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// driver is the embedded purge: the driver of a backend that is a
// store.Purger.
type driver struct {
	env    *retention.Env
	purger store.Purger
	pace   *pacer
	// durable keeps the outbox's readers to what is on disk (outbox.go).
	durable *durability
}

// New is the embedded store's retention.NewDriver with the default
// Options.
func New(ctx context.Context, env *retention.Env) (retention.Driver, error) {
	return Options{}.New(ctx, env)
}

// New is the embedded store's retention.NewDriver: the engine's backend
// must be a store.Purger. It has the store tally every image kind's
// primary rows and declares their index tables minute-keyed, so that a
// purge reads tallies rather than rows and holds off only the writes of
// the days it deletes.
func (o Options) New(ctx context.Context, env *retention.Env) (retention.Driver, error) {
	opts := env.Options()
	p, ok := opts.Backend.(store.Purger)
	if !ok {
		return nil, errors.New("retention/embedded: the backend is not a store.Purger")
	}
	if opts.LiveRowsPerSecond > 0 {
		// Its cost follows sections, not rows (pace.go).
		return nil, errors.New("retention/embedded: the embedded purge paces by time while requests are served (Options.LiveShare), not by LiveRowsPerSecond")
	}
	for _, r := range opts.Repositories {
		primary, index := r.Tables()
		if err := p.MinuteKeyed(ctx, index.Name()); err != nil {
			return nil, err
		}
		err := p.Tally(ctx, primary.Name())
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
	durable, err := startDurability(ctx, env.Outbox())
	if err != nil {
		return nil, err
	}
	return &driver{env: env, purger: p, pace: newPacer(o, opts.Live), durable: durable}, nil
}

// progress is a kind's progress in the embedded purge, kept in
// the job's record (retention.KindProgress.embedded).
type progress struct {
	// IndexBefore is the minute before which the
	// purge deletes the kind's index by range (see embedded.go), fixed by
	// its first section so that a resumed run deletes the same.
	IndexBefore time.Time `json:"indexBefore,omitzero"`
	// KeptBefore is the oldest minute the sections so far found a kept
	// camera to have rows in, or a purged camera's boundary: the index
	// goes by range only before it.
	KeptBefore time.Time `json:"keptBefore,omitzero"`
	// Orphans are the index partitions whose rows without a primary row
	// the embedded purge deletes in its orphans phase, from OrphansAt on
	// (nil: their start); SectionsLeft says the kind's sections resume
	// after it (a run stopped before its last section).
	Orphans      *store.Range  `json:"orphans,omitempty"`
	OrphansAt    *store.Cursor `json:"orphansAt,omitempty"`
	SectionsLeft bool          `json:"sectionsLeft,omitempty"`
	// IndexPending counts the index rows of the
	// primary rows the sections deleted that the last section's range
	// deletion takes: they are counted in retention.Counts.IndexRows when it does,
	// or by the orphans pass as it deletes them (a run that stops first).
	IndexPending int64 `json:"indexPending,omitempty"`
	// SectionedTo is the camera id the committed
	// sections but the last reached: they counted the cameras before it,
	// so a resumed run counts each camera once.
	SectionedTo string `json:"sectionedTo,omitempty"`
}

// phaseOrphans is the embedded purge's phase between retention.PhasePlan and
// retention.PhaseDone in which the index rows left in progress.Orphans by a
// purge cut short are deleted (orphans.go).
const phaseOrphans = "orphans"

// state is the kind's progress in the job's record.
func state(p *retention.KindProgress) *progress { return retention.DriverState[progress](p) }

func (d *driver) Name() string { return "embedded" }

// Serve runs nothing: the embedded purge needs no queue and no workers.
func (d *driver) Serve(context.Context, *sync.WaitGroup) {}

// BeginJob does nothing: a section's writes are the job's record's, which
// holds the lease.
func (d *driver) BeginJob(context.Context, string) error { return nil }

// StartJob, AbandonStart, DropJob and Retire do nothing: a job's state
// is all in its record, and the outbox is the store's, not the job's.
func (d *driver) StartJob(context.Context, *retention.Job) error     { return nil }
func (d *driver) AbandonStart(context.Context, *retention.Job) error { return nil }
func (d *driver) DropJob(context.Context, string) error              { return nil }
func (d *driver) Retire(context.Context, time.Time) error            { return nil }

// SettleCancelled does nothing: the counts are in the job's record with
// the deletes they count.
func (d *driver) SettleCancelled(context.Context, string, images.Kind) error { return nil }

// surveyed is one camera the survey found with rows up to the job's
// newest boundary.
type surveyed struct {
	id string
	// boundary is the camera's own (the job's without policies); zero if
	// its rows are kept.
	boundary time.Time
	// thin are the windows its tiers thin.
	thin []policy.Window
	// held says a legal hold keeps the rows it would otherwise lose.
	held bool
	// rows it would lose, thinned the thinned ones of them.
	rows, thinned int64
	// units is its section's work (pace.go): a unit per day tally its
	// section reads, and per row it reads one by one (for the outbox, or
	// to thin).
	units int64
}

// kindRun is one kind of one job on a Purger.
type kindRun struct {
	env            *retention.Env
	purger         store.Purger
	pace           *pacer
	durable        *durability
	id             string
	kind           images.Kind
	repo           *images.Repository
	primary, index store.Table
	// through is the newest instant any camera's rows can go before: its
	// boundary, or the end of its newest thinning window.
	through time.Time
	// aged is the newest boundary any camera can have.
	aged time.Time
	// rules give each camera its boundary, windows and hold.
	rules *retention.Rules
	// surveyed are the boundaries the survey gave the cameras it found.
	surveyed map[string]time.Time
	// countedBefore is where the sections of earlier runs of the job got
	// to (progress.SectionedTo): they counted the cameras before it.
	// counted are the cameras this run's sections counted, so that the
	// last section, which meets every camera again, counts each once.
	countedBefore string
	counted       map[string]struct{}
	// late records the cameras written with rows before through since
	// this run's sections began: the last section reads those again, not
	// every camera.
	late store.LateWrites
}

// PurgeKind runs one kind of a job on a store that tallies its rows,
// from wherever a previous run left it: every section's deletes and the
// job's counts commit together, so a rerun finds only what is left.
func (d *driver) PurgeKind(ctx context.Context, id string, kind images.Kind) error {
	e := d.env
	j, err := e.Job(ctx, id)
	if err != nil {
		return err
	}
	p := j.Progress(kind)
	if p.Phase == retention.PhaseDone {
		return nil
	}
	if j.CancelRequested && p.Phase != phaseOrphans && state(p).IndexPending == 0 {
		return retention.ErrCancelled // no index row waits for its range deletion
	}
	if p.Phase != retention.PhasePlan && p.Phase != phaseOrphans {
		return fmt.Errorf("%w: phase %q", retention.ErrForeignJob, p.Phase)
	}
	r := &kindRun{env: d.env, purger: d.purger, pace: d.pace, durable: d.durable, id: id, kind: kind, repo: e.Repository(kind), aged: j.KindBoundary(kind), through: j.Reach(kind),
		countedBefore: state(p).SectionedTo, counted: map[string]struct{}{}}
	r.primary, r.index = r.repo.Tables()
	spanName := "purge.embedded"
	if j.DryRun {
		spanName = "purge.dry_run"
	}
	ctx, endSpan := e.StartSpan(ctx, spanName)
	switch {
	case p.Phase == phaseOrphans:
		// Resumed in its orphans pass; sections may be left after it.
		if err = r.dropOrphans(ctx); err == nil && j.CancelRequested {
			err = retention.ErrCancelled
		}
		if err == nil {
			if j, err = e.Job(ctx, id); err == nil && j.Progress(kind).Phase == retention.PhasePlan {
				if err = r.run(ctx, j); err != nil {
					err = r.stopped(ctx, err)
				}
			}
		}
	case j.CancelRequested:
		// Cancelled after some sections, and stopped (a restart) before
		// their orphans went.
		err = r.stopped(ctx, retention.ErrCancelled)
	default:
		if err = r.run(ctx, j); err != nil {
			err = r.stopped(ctx, err)
		}
	}
	endSpan(err)
	return err
}

func (r *kindRun) run(ctx context.Context, j *retention.Job) error {
	// The first purge of a store written before tallies waits for their
	// backfill.
	if err := r.purger.AwaitTally(ctx, r.primary.Name()); err != nil {
		return err
	}
	var err error
	if r.rules, err = r.env.Rules(ctx, j, r.kind); err != nil {
		return err
	}
	// Every camera has the job's boundary, none is kept: no policies, no
	// holds, not one camera's delete (each stops the index's range deletion
	// before the rows of the cameras it keeps), and no dry run, row cap or
	// outbox (each counts rows before it deletes them).
	uniform := !j.UsePolicies && j.Camera == "" && r.rules.Holds() == 0 && !j.DryRun && r.env.PaceStep(j) == math.MaxInt64 && r.env.Outbox() == nil
	if uniform && r.pace.units() == 0 {
		// A fleet that fits one section needs no survey. A larger one stops
		// the section, which commits nothing, at its limit. (A purge while
		// requests are served is sectioned, by time.)
		err := r.pace.section(ctx, 0, func(c *sectionClock) error {
			return r.section(ctx, "", "", "", r.through, true, r.env.Options().SectionCameras, 0, c)
		})
		if !errors.Is(err, errSectionFull) {
			return r.finishRun(ctx, err)
		}
	}
	var cameras []surveyed
	var indexBefore time.Time
	if uniform {
		cameras, indexBefore, err = r.list(ctx)
	} else {
		cameras, indexBefore, err = r.survey(ctx, j)
	}
	if err != nil {
		return err
	}
	if j.DryRun {
		var c retention.Counts
		for _, s := range cameras {
			if s.held {
				c.DevicesTotal++
				c.DevicesHeld++
			}
			if s.rows > 0 {
				c.DevicesTotal++
				c.DevicesDone++
				c.MetadataRows += s.rows
				c.ThinnedRows += s.thinned
			}
		}
		c.IndexRows = c.MetadataRows
		_, err := r.env.UpdateJob(ctx, r.id, func(j *retention.Job) error {
			p := j.Progress(r.kind)
			p.Counts, p.Phase = c, retention.PhaseDone
			return nil
		})
		return err
	}
	r.surveyed = make(map[string]time.Time, len(cameras))
	for _, s := range cameras {
		r.surveyed[s.id] = s.boundary
	}
	return r.finishRun(ctx, r.sections(ctx, j, cameras, indexBefore))
}

// sections purges the surveyed cameras in sections. Every section but the
// last covers a range of camera ids; the last covers them all, so it also
// catches what was created since. While requests are served a section
// holds about Options.SectionTime of work and rests after (pace.go); a
// job with a cap of rows holds about a step of it, and waits for its
// primary rows and as many index rows, or a cancel. Both are taken again
// for each section: requests come and go.
func (r *kindRun) sections(ctx context.Context, j *retention.Job, cameras []surveyed, indexBefore time.Time) error {
	rowBudget := func() int64 {
		if r.env.Outbox() != nil {
			return min(r.env.PaceStep(j), outboxSectionRows)
		}
		return r.env.PaceStep(j)
	}
	// This run's sections cover every camera id from the first on, so
	// what was written before a camera's section it reads, and what
	// after, the watch records, whatever runs of the job came before.
	var stopWatch func()
	var err error
	if r.late, stopWatch, err = r.purger.WatchLate(r.primary.Name(), r.through); err != nil {
		return err
	}
	defer func() { stopWatch(); r.late = nil }()
	rows, units, n := int64(0), int64(0), 0
	budget, unitBudget := rowBudget(), r.pace.units()
	from := ""
	for i, s := range cameras {
		rows, units, n = rows+s.rows, units+s.units, n+1
		full := n >= r.env.Options().SectionCameras || rows >= budget || (unitBudget > 0 && units >= unitBudget)
		if i+1 == len(cameras) || !full {
			continue
		}
		to := cameras[i+1].id
		err := r.env.PaceUntilCancel(ctx, j, 2*rows)
		if err == nil {
			err = r.pace.section(ctx, units, func(c *sectionClock) error {
				return r.section(ctx, from, to, from, indexBefore, false, 0, n, c)
			})
		}
		if err != nil {
			return err
		}
		from, rows, units, n = to, 0, 0, 0
		budget, unitBudget = rowBudget(), r.pace.units()
	}
	if err := r.env.PaceUntilCancel(ctx, j, 2*rows); err != nil {
		return err
	}
	// The last section reads again the tallies of the cameras written
	// late (or of every camera): a unit each.
	units += int64(r.lateCameras(len(cameras)))
	return r.pace.section(ctx, units, func(c *sectionClock) error {
		return r.section(ctx, "", "", from, indexBefore, true, 0, 0, c)
	})
}

// finishRun ends a run whose last section ended with err: with the orphan
// pass it may have left.
func (r *kindRun) finishRun(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	return r.dropOrphans(ctx)
}

// errSectionFull stops a section that met more cameras than its limit.
var errSectionFull = errors.New("retention: more cameras than one section holds")

// stopped ends a run that err stopped (a cancel, or a failure). Its
// committed sections deleted primary rows whose index rows wait for the
// last section's range deletion (progress.IndexPending): they go by
// the orphans pass, counted as it deletes them, and the job then ends, by
// err, with the counts of what it deleted. A run stopped by its process
// going away or its lease lost leaves them to the run that resumes it.
func (r *kindRun) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, retention.ErrLeaseLost) {
		return err
	}
	j, gerr := r.env.Job(ctx, r.id)
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	if p := j.Progress(r.kind); p.Phase != phaseOrphans && state(p).IndexPending == 0 {
		return err
	}
	if _, uerr := r.env.UpdateJob(ctx, r.id, func(j *retention.Job) error {
		if p := j.Progress(r.kind); p.Phase != phaseOrphans {
			toOrphans(p, true)
		}
		return nil
	}); uerr != nil {
		return errors.Join(err, uerr)
	}
	if oerr := r.dropOrphans(ctx); oerr != nil {
		return oerr
	}
	return err
}

// toOrphans leaves the index rows before p.IndexBefore whose primary rows
// are gone to the orphans pass, which counts them as it deletes them; the
// kind's sections resume after it if sectionsLeft.
func toOrphans(p *retention.KindProgress, sectionsLeft bool) {
	p.Phase, state(p).Orphans, state(p).OrphansAt = phaseOrphans, &store.Range{To: store.MinutePartitionKey(state(p).IndexBefore)}, nil
	state(p).IndexPending, state(p).SectionsLeft = 0, sectionsLeft
}

// list is the survey of a purge in which every camera has the job's
// boundary (run): the cameras with tallies up to it and a unit per day
// tally, from the tallies' keys alone. Decoding every tally and resolving
// every camera's rule before the first section took 6 to 16 ms of a live
// purge of 4,000 cameras of about 40, for sections that read the same
// tallies again under their exclusion (docs/benchmarks.md, issue 44).
func (r *kindRun) list(ctx context.Context) ([]surveyed, time.Time, error) {
	var out []surveyed
	err := r.purger.TalliedPartitions(ctx, r.primary.Name(), r.through, func(camera string, days int) error {
		out = append(out, surveyed{id: camera, boundary: r.aged, units: int64(days)})
		return nil
	})
	return out, r.aged, err
}

// survey reads the tallies up to the newest boundary or thinning window,
// as they stand while creates go on, for the cameras with rows there,
// sorted, each with its rule and the rows it would lose; and the minute up
// to which the index can go by range: the job's boundary without
// policies, else the oldest of the purged cameras' boundaries and the kept
// cameras' oldest rows (thinned rows' index rows go by derived key).
func (r *kindRun) survey(ctx context.Context, j *retention.Job) ([]surveyed, time.Time, error) {
	at := map[string]int{}
	var out []surveyed
	indexBefore := r.aged
	err := r.purger.Tallies(ctx, r.primary.Name(), store.Range{}, r.through, func(t *store.DayTally) error {
		i, found := at[t.PartitionKey]
		if !found {
			// A camera's first tally with rows is its oldest day.
			oldest, any := t.Oldest()
			if !any {
				return nil
			}
			c, err := r.rule(ctx, t.PartitionKey, oldest)
			if err != nil {
				return err
			}
			i = len(out)
			at[t.PartitionKey] = i
			out = append(out, surveyed{id: t.PartitionKey, boundary: c.Boundary, thin: c.Thin, held: c.Held})
			if c.Boundary.IsZero() {
				indexBefore = store.MinTime(indexBefore, oldest)
			} else {
				indexBefore = store.MinTime(indexBefore, c.Boundary)
			}
		}
		s := &out[i]
		var rows, thinned int64
		if !s.boundary.IsZero() {
			rows = t.RowsBefore(s.boundary)
		}
		for _, span := range policy.Spans(t, s.thin) {
			rows, thinned = rows+span.Extra, thinned+span.Extra
		}
		s.rows, s.thinned = s.rows+rows, s.thinned+thinned
		s.units += 1 + thinned
		if r.env.Outbox() != nil {
			s.units += rows
		}
		return nil
	})
	slices.SortFunc(out, func(a, b surveyed) int { return strings.Compare(a.id, b.id) })
	return out, indexBefore, err
}

// rule is a camera's (see retention.Rules.resolve), its boundary zero if its
// rows are kept by age (no retention, or a legal hold).
func (r *kindRun) rule(ctx context.Context, camera string, oldest time.Time) (policy.CameraRule, error) {
	c, err := r.rules.Resolve(ctx, camera, oldest)
	if !c.Purge {
		c.Boundary = time.Time{}
	}
	return c, err
}

// eachRow visits a camera's primary rows captured in [start, end), newest
// first, with the properties of sel (keys alone when empty), as the store
// stands: a scan of the one partition (no key holds a control character,
// so none sorts between it and it followed by a space).
func (r *kindRun) eachRow(ctx context.Context, camera string, start, end time.Time, sel []string, visit func(store.Entity) error) error {
	rows := store.InvertedTicksRows(&start, &end)
	scan := store.Scan{Partitions: store.Range{From: camera, To: camera + " "}, Select: sel,
		Resume: &store.Cursor{PartitionKey: camera, RowKey: rows.From}}
	for {
		page, err := r.primary.Scan(ctx, scan)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			if e.RowKey >= rows.To {
				return nil
			}
			if err := visit(e); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		scan.Resume = page.Next
	}
}
