package retention

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// The embedded purge (a backend that is a store.Purger) deletes with the
// engine's own tools, without a queue, tasks or a sweep:
//
//   - the store tallies every primary row in the row's own batch, per
//     camera, capture day and minute, so a purge knows what a camera holds
//     before a boundary without reading a row;
//   - a section of cameras is one exclusive batch: while no other write
//     runs, it reads those cameras' tallies, deletes each one's expired rows
//     with one range deletion and trims its tallies, and writes the job's
//     record with the counts; a create of an old image is wholly before a
//     section (deleted and counted) or wholly after it (kept with both rows);
//   - the index rows of the expired minutes go in one range deletion, in the
//     last section, which first purges again whatever the earlier sections'
//     cameras got since (a late old image), so no index row of a kept
//     primary row goes, and no primary row is left without its index row.
//
// The index rows a purge deletes are counted as its primary rows: every
// create writes one of each in one batch, and a row's index partition is
// its capture minute. (An index row with no primary row, which only a copy
// from Azure can bring, goes with the range deletion uncounted.)
//
// With policies, a camera kept (held, spared, or on a longer retention)
// may have rows in the expired minutes: the index range deletion stops at
// the oldest minute any kept camera has, and the index rows of purged rows
// after it are deleted by their derived keys, in the batch that deletes
// their primary rows.

// sectionCameras is how many cameras one exclusive section purges by
// default: creates wait for a section, so it bounds their wait; a section
// of a thousand cameras takes a few milliseconds.
const sectionCameras = 10_000

// surveyed is one camera the survey found with rows up to the job's
// newest boundary.
type surveyed struct {
	id string
	// boundary is the camera's own (the job's without policies); zero if
	// its rows are kept.
	boundary time.Time
	// thin are the windows its tiers thin.
	thin []thinWindow
	// rows it would lose, thinned the thinned ones of them.
	rows, thinned int64
}

// embeddedRun is one kind of one job on a Purger.
type embeddedRun struct {
	e              *Engine
	purger         store.Purger
	id             string
	kind           images.Kind
	repo           *images.Repository
	primary, index store.Table
	// through is the newest instant any camera's rows can go before: its
	// boundary, or the end of its newest thinning window.
	through time.Time
	// aged is the newest boundary any camera can have.
	aged     time.Time
	policies *resolver
	// planned are the cameras the survey would purge, sorted: a camera held
	// since counts as held (Counts.DevicesHeld).
	planned []string
	// surveyed are the boundaries the survey gave the cameras it found.
	surveyed map[string]time.Time
}

// purgeEmbedded runs one kind of a job on a store that tallies its rows,
// from wherever a previous run left it: every section's deletes and the
// job's counts commit together, so a rerun finds only what is left.
func (e *Engine) purgeEmbedded(ctx context.Context, id string, kind images.Kind) error {
	j, _, err := e.jobs.get(ctx, id)
	if err != nil {
		return err
	}
	p := j.progress(kind)
	if p.Phase == phaseDone {
		return nil
	}
	if j.CancelRequested && p.Phase != phaseOrphans && p.IndexBefore.IsZero() {
		return errCancelled // nothing deleted yet
	}
	if p.Phase == phaseWork || p.Phase == phaseSweep || (p.Phase == phasePlan && !p.PlannedAt.IsZero()) {
		if j, err = e.adoptQueueJob(ctx, j, kind); err != nil {
			return err
		}
	}
	r := &embeddedRun{e: e, purger: e.purger, id: id, kind: kind, repo: e.repos[kind], aged: j.boundary(kind), through: j.reach(kind)}
	r.primary, r.index = r.repo.Tables()
	spanName := "purge.embedded"
	if j.DryRun {
		spanName = "purge.dry_run"
	}
	ctx, endSpan := e.startSpan(ctx, spanName)
	switch {
	case p.Phase == phaseOrphans:
		if err = r.dropOrphans(ctx, j); err == nil && j.CancelRequested {
			err = errCancelled
		}
	case j.CancelRequested:
		// Cancelled after some sections, and stopped (a restart) before
		// their orphans went.
		err = r.stopped(ctx, j, "sections done", p.IndexBefore, errCancelled)
	default:
		err = r.run(ctx, j)
	}
	endSpan(err)
	return err
}

// adoptQueueJob takes over a kind that the release before the tallies
// left in the queue design (planning, working or sweeping; its workers may
// run tasks while it plans): the counts become those of its
// tasks that ended, and the embedded purge deletes the rest. The index
// rows of those tasks' rows, whatever of them a sweep had deleted, go by the
// last section's range deletion: one per primary row, as every create
// wrote them. A task cut short may have deleted rows it never recorded:
// the job's rows count is then flagged a lower bound, the one case on this
// store.
func (e *Engine) adoptQueueJob(ctx context.Context, j *Job, kind images.Kind) (*Job, error) {
	var sum Counts
	cut := false
	err := e.tasks.each(ctx, j.ID, kind, func(t *task) error {
		switch {
		case t.Done:
			sum.add(t.counts())
		case t.begun():
			cut = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sum.MetadataRowsLowerBound = sum.MetadataRowsLowerBound || cut
	sum.IndexRows = sum.MetadataRows
	e.log.Info("purge: a purge of the release before tallies resumes on them", "job", j.ID, "kind", kind.String(),
		"rows_so_far", sum.MetadataRows, "lower_bound", sum.MetadataRowsLowerBound)
	return e.updateJob(ctx, j.ID, func(j *Job) error {
		p := j.progress(kind)
		// Adopted once: the sections' counts add to these from here.
		p.Counts, p.Phase, p.Intent, p.PlannedAt = sum, phasePlan, nil, time.Time{}
		return nil
	})
}

func (r *embeddedRun) run(ctx context.Context, j *Job) error {
	// The first purge of a store written before tallies waits for their
	// backfill.
	if err := r.purger.AwaitTally(ctx, r.primary); err != nil {
		return err
	}
	if j.UsePolicies {
		var err error
		if r.policies, err = r.e.policies.resolver(ctx, r.kind, j.Created); err != nil {
			return err
		}
	}
	if !j.UsePolicies && !j.DryRun && r.e.paceStep(j) == math.MaxInt64 && r.e.outbox == nil {
		// Every camera has the job's boundary: a fleet that fits one section
		// needs no survey. A larger one stops the section, which commits
		// nothing, at its limit. (A paced job surveys, to size its sections.)
		err := r.section(ctx, "", "", "", r.through, true, r.e.opts.SectionCameras)
		if !errors.Is(err, errSectionFull) {
			return r.finishRun(ctx, j, "", r.through, err)
		}
	}
	cameras, indexBefore, err := r.survey(ctx, j)
	if err != nil {
		return err
	}
	if j.DryRun {
		var c Counts
		for _, s := range cameras {
			if s.rows > 0 {
				c.DevicesTotal++
				c.DevicesDone++
				c.MetadataRows += s.rows
				c.ThinnedRows += s.thinned
			}
		}
		c.IndexRows = c.MetadataRows
		_, err := r.e.updateJob(ctx, r.id, func(j *Job) error {
			p := j.progress(r.kind)
			p.Counts, p.Phase = c, phaseDone
			return nil
		})
		return err
	}
	r.surveyed = make(map[string]time.Time, len(cameras))
	for _, s := range cameras {
		r.surveyed[s.id] = s.boundary
		if s.rows > 0 {
			r.planned = append(r.planned, s.id)
		}
	}
	// Every section but the last covers a range of camera ids; the last
	// covers them all, so it also catches what was created since. A paced
	// job's sections hold about a step of its pace, so it deletes little
	// and often; each waits for its primary rows and as many index rows,
	// or a cancel. The step is taken again for each section: the live cap
	// comes and goes with the requests.
	sectionRows := func() int64 {
		if r.e.outbox != nil {
			return min(r.e.paceStep(j), outboxSectionRows)
		}
		return r.e.paceStep(j)
	}
	budget := sectionRows()
	var rows int64
	from, n := "", 0
	for i, s := range cameras {
		rows, n = rows+s.rows, n+1
		if i+1 == len(cameras) || (n < r.e.opts.SectionCameras && rows < budget) {
			continue
		}
		to := cameras[i+1].id
		err := r.e.paceUntilCancel(ctx, j, 2*rows)
		if err == nil {
			err = r.section(ctx, from, to, from, indexBefore, false, 0)
		}
		if err != nil {
			return r.stopped(ctx, j, from, indexBefore, err)
		}
		from, rows, n, budget = to, 0, 0, sectionRows()
	}
	err = r.e.paceUntilCancel(ctx, j, 2*rows)
	if err == nil {
		err = r.section(ctx, "", "", from, indexBefore, true, 0)
	}
	return r.finishRun(ctx, j, from, indexBefore, err)
}

// finishRun ends a run whose last section ended with err: with the orphan
// pass it may have left, or stopped (see stopped).
func (r *embeddedRun) finishRun(ctx context.Context, j *Job, done string, indexBefore time.Time, err error) error {
	if err != nil {
		return r.stopped(ctx, j, done, indexBefore, err)
	}
	cur, _, err := r.e.jobs.get(ctx, r.id)
	if err != nil {
		return err
	}
	return r.dropOrphans(ctx, cur)
}

// errSectionFull stops a section that met more cameras than its limit.
var errSectionFull = errors.New("retention: more cameras than one section holds")

// stopped ends a run that err stopped before the section of the cameras
// from done. A cancel after some sections leaves their cameras' index rows,
// which only the last section deletes by range: they go by the orphan pass,
// and the job then ends cancelled with the counts of what it deleted.
func (r *embeddedRun) stopped(ctx context.Context, j *Job, done string, indexBefore time.Time, err error) error {
	if !errors.Is(err, errCancelled) || done == "" {
		return err
	}
	cur, err := r.e.updateJob(ctx, r.id, func(j *Job) error {
		p := j.progress(r.kind)
		if p.IndexBefore.IsZero() {
			p.IndexBefore = indexBefore
		}
		p.Phase, p.Orphans = phaseOrphans, &store.Range{To: store.MinutePartitionKey(p.IndexBefore)}
		return nil
	})
	if err != nil {
		return err
	}
	if err := r.dropOrphans(ctx, cur); err != nil {
		return err
	}
	return errCancelled
}

// survey reads the tallies up to the newest boundary or thinning window,
// as they stand while creates go on, for the cameras with rows there,
// sorted, each with its rule and the rows it would lose; and the minute up
// to which the index can go by range: the job's boundary without
// policies, else the oldest of the purged cameras' boundaries and the kept
// cameras' oldest rows (thinned rows' index rows go by derived key).
func (r *embeddedRun) survey(ctx context.Context, j *Job) ([]surveyed, time.Time, error) {
	at := map[string]int{}
	var out []surveyed
	indexBefore := r.aged
	err := r.purger.Tallies(ctx, r.primary, store.Range{}, r.through, func(t *store.DayTally) error {
		i, found := at[t.PartitionKey]
		if !found {
			// A camera's first tally with rows is its oldest day.
			oldest, any := t.Oldest()
			if !any {
				return nil
			}
			c, err := r.rule(ctx, j, t.PartitionKey, oldest)
			if err != nil {
				return err
			}
			i = len(out)
			at[t.PartitionKey] = i
			out = append(out, surveyed{id: t.PartitionKey, boundary: c.boundary, thin: c.thin})
			if c.boundary.IsZero() {
				indexBefore = minTime(indexBefore, oldest)
			} else {
				indexBefore = minTime(indexBefore, c.boundary)
			}
		}
		s := &out[i]
		if !s.boundary.IsZero() {
			s.rows += t.RowsBefore(s.boundary)
		}
		for _, span := range thinSpans(t, s.thin) {
			s.rows, s.thinned = s.rows+span.extra, s.thinned+span.extra
		}
		return nil
	})
	slices.SortFunc(out, func(a, b surveyed) int { return strings.Compare(a.id, b.id) })
	return out, indexBefore, err
}

// rule is a camera's: the job's boundary without policies, else its
// policy's boundary, zero if its rows are kept by age (no retention, or a
// legal hold), and its tiers' windows. oldest is its oldest row: the hold
// is read only for a camera whose policy deletes some.
func (r *embeddedRun) rule(ctx context.Context, j *Job, camera string, oldest time.Time) (cameraRule, error) {
	if r.policies == nil {
		if j.SpareHeld {
			if held, err := r.e.policies.held(ctx, camera); err != nil || held {
				return cameraRule{}, err
			}
		}
		return cameraRule{boundary: j.Boundary(), purge: true}, nil
	}
	c, err := r.policies.resolve(ctx, camera, oldest)
	if !c.purge {
		c.boundary = time.Time{}
	}
	return c, err
}

// section purges the cameras with ids in [from, to) (all of them when
// last) in one exclusive batch with the job's record. indexBefore is the
// minute the survey found the index can go by range up to; the last
// section deletes the index by range, up to the oldest minute a kept
// camera has by then.
//
// A camera before resolveFrom was resolved by an earlier section: its
// policy and hold are read again only if it has rows before the boundary
// it got then (an old image created since).
//
// A section with a limit above 0 fails with errSectionFull, committing
// nothing, once it meets more cameras than that.
func (r *embeddedRun) section(ctx context.Context, from, to, resolveFrom string, indexBefore time.Time, last bool, limit int) error {
	ended := false
	var deleted Counts // what the committed batch deleted
	err := r.purger.Exclusive(ctx, r.through, func(ctx context.Context, b store.PurgeBatch) error {
		j, _, err := r.e.jobs.get(ctx, r.id)
		if err != nil {
			return err
		}
		if err := checkLease(ctx, j); err != nil {
			return err
		}
		if j.CancelRequested {
			return errCancelled
		}
		p := j.progress(r.kind)
		if !p.IndexBefore.IsZero() {
			indexBefore = p.IndexBefore // a resumed job keeps the first run's
		}
		// Sized for the section's cameras: growing the map was a tenth of a
		// section's time at 4,000 cameras.
		hint := len(r.surveyed)
		if limit > 0 {
			hint = min(hint, limit)
		}
		s := &sectionScan{r: r, j: j, b: b, resolveFrom: resolveFrom, indexBefore: indexBefore, keptBefore: indexBefore,
			limit: limit, seen: make(map[string]sectionCamera, hint)}
		if r.e.outbox != nil {
			s.outbox = &outboxWriter{table: r.e.outbox, b: b, job: j.ID, kind: r.kind, at: r.e.opts.Now().UTC()}
		}
		if !p.KeptBefore.IsZero() {
			s.keptBefore = minTime(s.keptBefore, p.KeptBefore)
		}
		err = b.Tallies(ctx, r.primary, store.Range{From: from, To: to}, r.through, func(t *store.DayTally) error { return s.tally(ctx, t) })
		if err != nil {
			return err
		}
		if s.outbox != nil {
			if err := s.outbox.finish(); err != nil {
				return err
			}
		}
		p.Counts.add(s.c)
		deleted = s.c
		p.IndexBefore, p.KeptBefore = indexBefore, s.keptBefore
		if last {
			if ended, err = r.endSections(b, j, p); err != nil {
				return err
			}
		}
		e, err := jobEntity(j)
		if err != nil {
			return err
		}
		_, err = b.Put(r.e.jobs.table, e)
		return err
	})
	if err == nil {
		r.e.countDeleted(r.kind, deleted)
	}
	if err == nil && !ended {
		r.e.notify() // the job's record changed: wake its watchers (finish wakes them to its end)
	}
	return err
}

// sectionScan is one section's pass over its cameras' tallies, within
// the section's batch.
type sectionScan struct {
	r           *embeddedRun
	j           *Job
	b           store.PurgeBatch
	resolveFrom string
	indexBefore time.Time // the index partitions before it go by range
	keptBefore  time.Time // the oldest row a kept camera keeps
	limit       int       // cameras in the section; 0: no limit
	seen        map[string]sectionCamera
	c           Counts // what the section deletes
	// outbox, with Options.Outbox, stages the deleted images' outbox rows.
	outbox *outboxWriter
}

// sectionCamera is what a section has learnt of a camera.
type sectionCamera struct {
	boundary time.Time // its rows before it go; zero: it keeps them
	// thin are the windows its tiers thin in this section: none for a
	// camera an earlier section thinned.
	thin   []thinWindow
	purged bool
}

// tally deletes a camera's rows of one day before its boundary, finding
// the boundary at the camera's first tally, and their index rows.
func (s *sectionScan) tally(ctx context.Context, t *store.DayTally) error {
	r := s.r
	cam, ok := s.seen[t.PartitionKey]
	if !ok {
		oldest, any := t.Oldest()
		if !any {
			return nil
		}
		if s.limit > 0 && len(s.seen) >= s.limit {
			return errSectionFull
		}
		// A camera an earlier section resolved is not thinned again here:
		// its section did, and a hold placed since must stand. What lands
		// in its windows meanwhile waits for the next pass.
		bnd, known := r.surveyed[t.PartitionKey]
		var thin []thinWindow
		switch {
		case known && t.PartitionKey < s.resolveFrom && bnd.IsZero():
			// Kept when surveyed; an earlier section saw it so too.
			s.keptBefore = minTime(s.keptBefore, oldest)
		case known && t.PartitionKey < s.resolveFrom && t.RowsBefore(bnd) == 0:
			// Purged by an earlier section, nothing created since.
			bnd = time.Time{}
		default:
			c, err := r.rule(ctx, s.j, t.PartitionKey, oldest)
			if err != nil {
				return err
			}
			bnd, thin = c.boundary, c.thin
			if bnd.IsZero() {
				s.keptBefore = minTime(s.keptBefore, oldest)
				if len(thin) == 0 && r.wasPlanned(t.PartitionKey) {
					s.c.DevicesHeld++
				}
			} else {
				s.keptBefore = minTime(s.keptBefore, bnd)
			}
		}
		cam = sectionCamera{boundary: bnd, thin: thin}
	}
	wasPurged := cam.purged
	if !cam.boundary.IsZero() && t.Day.Before(cam.boundary) {
		if s.outbox != nil {
			// Read before the batch deletes them, for their blob URIs.
			err := r.eachRow(ctx, t.PartitionKey, t.Day, minTime(cam.boundary, t.Day.Add(24*time.Hour)), []string{images.PropBlobURI},
				func(e store.Entity) error { return s.outbox.add(ctx, t.PartitionKey, e) })
			if err != nil {
				return err
			}
		}
		n, err := s.b.DeleteRowsBefore(r.primary, t.PartitionKey, cam.boundary, []store.DayTally{*t})
		if err != nil {
			return err
		}
		if n > 0 {
			cam.purged = true
			s.c.MetadataRows += n
			indexRows, err := r.deleteIndexRows(ctx, s.b, t, s.indexBefore, cam.boundary)
			if err != nil {
				return err
			}
			s.c.IndexRows += indexRows
		}
	}
	if len(cam.thin) > 0 {
		n, indexRows, err := r.thinDay(ctx, s.b, t, cam.thin, s.outbox)
		if err != nil {
			return err
		}
		if n > 0 {
			cam.purged = true
			s.c.MetadataRows += n
			s.c.ThinnedRows += n
			s.c.IndexRows += indexRows
		}
	}
	if cam.purged && !wasPurged {
		s.c.DevicesTotal++
		s.c.DevicesDone++
	}
	if !ok || cam.purged != wasPurged {
		s.seen[t.PartitionKey] = cam
	}
	return nil
}

// thinDay thins a camera's day in its windows: each run of intervals its
// tally shows with more than one row is thinned by ThinRows (a pano's
// keeper the first clear-day image of its interval, when there is one),
// and the deleted rows' index rows go by their derived keys in the same
// batch, unread: a key read per row was two thirds of a thinning's time.
// It returns the primary and index rows it deleted, one index row per
// primary row, as every create writes them (in either form).
func (r *embeddedRun) thinDay(ctx context.Context, b store.PurgeBatch, t *store.DayTally, windows []thinWindow, outbox *outboxWriter) (rows, indexRows int64, err error) {
	var prefer func(store.Entity) bool
	if r.kind == images.Pano {
		prefer = func(e store.Entity) bool { clear, _ := e.Properties[images.PropIsClearDay].(bool); return clear }
	}
	for _, span := range thinSpans(t, windows) {
		deleted, err := b.ThinRows(ctx, r.primary, t.PartitionKey, span.from, span.to, span.every, prefer)
		if err != nil {
			return 0, 0, err
		}
		rows += int64(len(deleted))
		for _, rowKey := range deleted {
			if outbox != nil {
				// The batch has not deleted it yet: the store still has it.
				e, err := r.primary.Get(ctx, t.PartitionKey, rowKey)
				if err != nil {
					return 0, 0, err
				}
				if err := outbox.add(ctx, t.PartitionKey, e); err != nil {
					return 0, 0, err
				}
			}
			for _, k := range r.repo.IndexKeys(t.PartitionKey, rowKey) {
				if err := b.DeleteUnread(r.index, k); err != nil {
					return 0, 0, err
				}
			}
		}
	}
	indexRows = rows
	return rows, indexRows, nil
}

// endSections is the last section's own work, in its batch: the index
// partitions before the sections' minute go by range, and the job ends
// unless orphaned index rows are left to delete.
func (r *embeddedRun) endSections(b store.PurgeBatch, j *Job, p *KindProgress) (ended bool, err error) {
	ranged := p.IndexBefore
	p.Phase = phaseDone
	if p.KeptBefore.Before(p.IndexBefore) {
		// A camera kept since the survey has rows before the minute the
		// earlier sections left to the range deletion: stop it there; the
		// index rows in between whose rows are gone go next.
		ranged = p.KeptBefore
		p.Phase, p.Orphans = phaseOrphans, &store.Range{From: store.MinutePartitionKey(p.KeptBefore), To: store.MinutePartitionKey(p.IndexBefore)}
	}
	if err := b.DeletePartitions(r.index, images.ExpiredIndex(ranged)); err != nil {
		return false, err
	}
	if ended = r.endsJob(j); ended {
		// The job's end and its marker's drop ride in this batch: two synced
		// writes fewer (finish sees it ended).
		r.e.end(j, nil)
		if _, err := b.Delete(r.e.jobs.table, store.Key{PartitionKey: activePartition, RowKey: j.ID}); err != nil {
			return false, err
		}
	}
	return ended, nil
}

// endsJob reports whether a last section that leaves this kind done ends
// j: every other kind is done too.
func (r *embeddedRun) endsJob(j *Job) bool {
	for _, p := range j.Kinds {
		if p.Phase != phaseDone {
			return false
		}
	}
	return !j.DryRun
}

// deleteIndexRows deletes, by their derived keys, the index rows of a
// camera's day's rows between indexBefore (before which the index goes by
// range) and the camera's boundary, and counts the index rows the purge
// removes of that day: those the range deletion takes and those.
func (r *embeddedRun) deleteIndexRows(ctx context.Context, b store.PurgeBatch, t *store.DayTally, indexBefore, boundary time.Time) (int64, error) {
	n := t.RowsBefore(minTime(indexBefore, boundary))
	if !boundary.After(indexBefore) {
		return n, nil
	}
	start, end := maxTime(indexBefore, t.Day), minTime(boundary, t.Day.Add(24*time.Hour))
	if !start.Before(end) {
		return n, nil
	}
	err := r.eachRow(ctx, t.PartitionKey, start, end, []string{}, func(e store.Entity) error {
		for _, k := range r.repo.IndexKeys(t.PartitionKey, e.RowKey) {
			found, err := b.Delete(r.index, k)
			if err != nil {
				return err
			}
			if found {
				n++
			}
		}
		return nil
	})
	return n, err
}

// eachRow visits a camera's primary rows captured in [start, end), newest
// first, with the properties of sel (keys alone when empty), as the store
// stands: a scan of the one partition (no key holds a control character,
// so none sorts between it and it followed by a space).
func (r *embeddedRun) eachRow(ctx context.Context, camera string, start, end time.Time, sel []string, visit func(store.Entity) error) error {
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

// dropOrphans deletes the index rows of the job's orphan partitions
// (KindProgress.Orphans) whose primary rows are gone, then marks the kind
// done. It needs no exclusive batch: each delete holds only if the row is
// still the version read, and a primary row comes back only with a create
// that rewrites its index row too. Their rows were counted when their
// primary rows went.
func (r *embeddedRun) dropOrphans(ctx context.Context, j *Job) error {
	p := j.progress(r.kind)
	if p.Phase != phaseOrphans || p.Orphans == nil {
		return nil
	}
	err := r.repo.EachIndexRow(ctx, *p.Orphans, func(row images.IndexRow) error {
		if row.CameraID == "" {
			return nil
		}
		_, err := r.primary.Get(ctx, row.CameraID, row.RowKey)
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		err = r.index.Delete(ctx, row.PartitionKey, row.Key.RowKey, row.ETag)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	_, err = r.e.updateJob(ctx, r.id, func(j *Job) error {
		p := j.progress(r.kind)
		p.Phase, p.Orphans = phaseDone, nil
		return nil
	})
	return err
}

func (r *embeddedRun) wasPlanned(camera string) bool {
	i := sort.SearchStrings(r.planned, camera)
	return i < len(r.planned) && r.planned[i] == camera
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
