package embedded

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// section purges the cameras with ids in [from, to) (all of them when
// last) in one exclusive batch with the job's record. indexBefore is the
// minute the survey found the index can go by range up to; the last
// section deletes the index by range, up to the oldest minute a kept
// camera has by then.
//
// A camera before resolveFrom was resolved by an earlier section: its
// policy and hold are read again only if it has rows before the boundary
// it got then (an old image created since). The holds are read at the
// section's start, under its exclusion: a hold placed before it spares
// its cameras, one placed after waits for its commit.
//
// A section with a limit above 0 fails with errSectionFull, committing
// nothing, once it meets more cameras than that; else expect is about how
// many cameras it meets (0: every camera surveyed). It times itself on
// clock, for the pacer.
func (r *kindRun) section(ctx context.Context, from, to, resolveFrom string, indexBefore time.Time, last bool, limit, expect int, clock *sectionClock) error {
	ended := false
	var deleted retention.Counts // what the committed batch deleted
	var counted map[string]struct{}
	var outbox *outboxWriter
	if r.env.Outbox() != nil {
		r.durable.begin()
	}
	err := r.purger.Exclusive(ctx, r.through, func(ctx context.Context, b store.PurgeBatch) error {
		clock.start()
		j, err := r.env.Job(ctx, r.id)
		if err != nil {
			return err
		}
		if j.CancelRequested {
			return retention.ErrCancelled
		}
		if err := r.rules.RefreshHolds(ctx); err != nil {
			return err
		}
		p := j.Progress(r.kind)
		if !state(p).IndexBefore.IsZero() {
			indexBefore = state(p).IndexBefore // a resumed job keeps the first run's
		}
		s := r.scanFor(j, b, p, resolveFrom, indexBefore, last, limit, expect)
		outbox = s.outbox
		scan := time.Now()
		err = r.tallies(ctx, b, from, to, resolveFrom, last, func(t *store.DayTally) error { return s.tally(ctx, t) })
		clock.scanned(time.Since(scan))
		if err != nil {
			return err
		}
		if s.outbox != nil {
			if err := s.outbox.finish(); err != nil {
				return err
			}
		}
		p.Counts.Add(s.c)
		state(p).IndexPending += s.pending
		deleted = s.c
		state(p).IndexBefore, state(p).KeptBefore = indexBefore, s.keptBefore
		if !last && to > state(p).SectionedTo {
			state(p).SectionedTo = to
		}
		if last {
			credited, err := r.endSections(b, j, p)
			if err != nil {
				return err
			}
			deleted.IndexRows += credited
			ended = j.State.Terminal()
		}
		counted = s.counted
		table, e, err := r.env.JobRecord(ctx, j)
		if err != nil {
			return err
		}
		_, err = b.Put(table, e)
		return err
	})
	if r.env.Outbox() != nil {
		r.durable.done(outbox.committed(err))
	}
	if err == nil {
		r.env.CountDeleted(r.kind, deleted)
		maps.Copy(r.counted, counted)
	}
	if err == nil && !ended {
		r.env.Notify() // the job's record changed: wake its watchers (finish wakes them to its end)
	}
	return err
}

// tallies visits a section's tallies: its cameras', [from, to). The last
// section's cover every camera, to catch what was created since the
// camera's own section; where the store watched since the job's first
// section (kindRun.late), those of the cameras before resolveFrom are
// read only if written late, in the days the job purges: on a live store,
// almost none, where every camera's read was the largest section of a
// purge of many cameras and a spike for the requests.
func (r *kindRun) tallies(ctx context.Context, b store.PurgeBatch, from, to, resolveFrom string, last bool, visit func(*store.DayTally) error) error {
	if last && r.late != nil {
		if late, all := r.late.Late(); !all {
			n, _ := slices.BinarySearch(late, resolveFrom)
			if err := b.TalliesOf(ctx, r.primary.Name(), late[:n], r.through, visit); err != nil {
				return err
			}
			from = resolveFrom
		}
	}
	return b.Tallies(ctx, r.primary.Name(), store.Range{From: from, To: to}, r.through, visit)
}

// lateCameras is how many cameras of fleet the last section reads again
// (tallies).
func (r *kindRun) lateCameras(fleet int) int {
	if r.late == nil {
		return fleet
	}
	if late, all := r.late.Late(); !all {
		return len(late)
	}
	return fleet
}

// scanFor is a section's pass over its cameras in b, for the job's
// progress p.
func (r *kindRun) scanFor(j *retention.Job, b store.PurgeBatch, p *retention.KindProgress, resolveFrom string, indexBefore time.Time, last bool, limit, expect int) *sectionScan {
	// Sized for the section's cameras: growing the map was a tenth of a
	// section's time at 4,000 cameras, and a map for the whole fleet
	// at every section of a few cameras a third of a live purge's CPU
	// at 10,000.
	hint := len(r.surveyed)
	if limit > 0 {
		hint = min(hint, limit)
	} else if expect > 0 {
		hint = min(hint, expect)
	}
	s := &sectionScan{r: r, j: j, b: b, resolveFrom: resolveFrom, indexBefore: indexBefore, keptBefore: indexBefore,
		limit: limit, seen: make(map[string]sectionCamera, hint), counted: map[string]struct{}{},
		index: indexDeleter{b: b, r: r, oneForm: b.InstantFirst(r.index.Name())}}
	if r.env.Outbox() != nil {
		s.outbox = &outboxWriter{table: r.env.Outbox(), b: b, job: j.ID, kind: r.kind, at: r.env.Options().Now().UTC()}
	} else if !last {
		// A section is its deletes, counts and job record in one batch:
		// a crash that loses it loses a section not yet run, which the
		// resumed job runs. So it need not wait for a sync of its own
		// (the next create's makes it durable), unless it writes outbox
		// records, which the blob deleter may act on at once: a blob
		// deleted for a row a crash brings back is lost for good. The
		// last section ends the job, which its watchers act on: synced.
		b.Unsynced()
	}
	if !state(p).KeptBefore.IsZero() {
		s.keptBefore = store.MinTime(s.keptBefore, state(p).KeptBefore)
	}
	return s
}

// sectionScan is one section's pass over its cameras' tallies, within
// the section's batch.
type sectionScan struct {
	r           *kindRun
	j           *retention.Job
	b           store.PurgeBatch
	resolveFrom string
	indexBefore time.Time // the index partitions before it go by range
	keptBefore  time.Time // the oldest row a kept camera keeps
	limit       int       // cameras in the section; 0: no limit
	seen        map[string]sectionCamera
	c           retention.Counts // what the section deletes
	// pending are the index rows of the rows it deletes that the last
	// section's range deletion takes (progress.IndexPending).
	pending int64
	// counted are the cameras it counts in c, devices purged or held.
	counted map[string]struct{}
	// outbox, with Options.Outbox, stages the deleted images' outbox rows.
	outbox *outboxWriter
	// index deletes the index rows of the rows the section deletes.
	index indexDeleter
}

// sectionCamera is what a section has learnt of a camera.
type sectionCamera struct {
	boundary time.Time // its rows before it go; zero: it keeps them
	// thin are the windows its tiers thin in this section: none for a
	// camera an earlier section thinned.
	thin   []policy.Window
	purged bool
	// counted says the camera is in the job's counts already.
	counted bool
}

// tally deletes a camera's rows of one day before its boundary, finding
// the boundary at the camera's first tally, and their index rows.
func (s *sectionScan) tally(ctx context.Context, t *store.DayTally) error {
	r := s.r
	cam, seen := s.seen[t.PartitionKey]
	if !seen {
		var rows bool
		var err error
		if cam, rows, err = s.meet(ctx, t); !rows || err != nil {
			return err
		}
	}
	wasPurged := cam.purged
	if !cam.boundary.IsZero() && t.Day.Before(cam.boundary) {
		if s.outbox != nil {
			// Read before the batch deletes them, for their blob URIs.
			err := r.eachRow(ctx, t.PartitionKey, t.Day, store.MinTime(cam.boundary, t.Day.Add(24*time.Hour)), []string{images.PropBlobURI},
				func(e store.Entity) error { return s.outbox.add(ctx, t.PartitionKey, e) })
			if err != nil {
				return err
			}
		}
		n, err := s.b.DeleteRowsBefore(r.primary.Name(), t.PartitionKey, cam.boundary, []store.DayTally{*t})
		if err != nil {
			return err
		}
		if n > 0 {
			cam.purged = true
			s.c.MetadataRows += n
			pending, indexRows, err := r.deleteIndexRows(ctx, s.index, t, s.indexBefore, cam.boundary)
			if err != nil {
				return err
			}
			s.pending += pending
			s.c.IndexRows += indexRows
		}
	}
	if len(cam.thin) > 0 {
		n, indexRows, err := r.thinDay(ctx, s.b, s.index, t, cam.thin, s.outbox)
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
	if cam.purged && !wasPurged && !cam.counted && s.count(t.PartitionKey) {
		s.c.DevicesTotal++
		s.c.DevicesDone++
	}
	if !seen || cam.purged != wasPurged {
		s.seen[t.PartitionKey] = cam
	}
	return nil
}

// meet resolves a camera at its first tally with rows in the section:
// its boundary and windows, and whether it counts; false if the tally has
// no rows.
func (s *sectionScan) meet(ctx context.Context, t *store.DayTally) (sectionCamera, bool, error) {
	r := s.r
	oldest, any := t.Oldest()
	if !any {
		return sectionCamera{}, false, nil
	}
	if s.limit > 0 && len(s.seen) >= s.limit {
		return sectionCamera{}, false, errSectionFull
	}
	// A camera an earlier section resolved is not thinned again here:
	// its section did, and a hold placed since must stand. What lands
	// in its windows meanwhile waits for the next pass.
	bnd, known := r.surveyed[t.PartitionKey]
	var thin []policy.Window
	switch {
	case known && t.PartitionKey < s.resolveFrom && bnd.IsZero():
		// Kept when surveyed; an earlier section saw it so too.
		s.keptBefore = store.MinTime(s.keptBefore, oldest)
	case known && t.PartitionKey < s.resolveFrom && t.RowsBefore(bnd) == 0:
		// Purged by an earlier section, nothing created since.
		bnd = time.Time{}
	default:
		c, err := r.rule(ctx, t.PartitionKey, oldest)
		if err != nil {
			return sectionCamera{}, false, err
		}
		bnd, thin = c.Boundary, c.Thin
		if bnd.IsZero() {
			s.keptBefore = store.MinTime(s.keptBefore, oldest)
		} else {
			s.keptBefore = store.MinTime(s.keptBefore, bnd)
		}
		if c.Held && s.count(t.PartitionKey) {
			s.c.DevicesTotal++
			s.c.DevicesHeld++
		}
	}
	return sectionCamera{boundary: bnd, thin: thin, counted: !r.countable(t.PartitionKey)}, true, nil
}

// thinDay thins a camera's day in its windows: each run of intervals its
// tally shows with more than one row is thinned by ThinRows (a pano's
// keeper the first clear-day image of its interval, when there is one),
// and the deleted rows' index rows go by their derived keys in the same
// batch, unread (index): a key read per row was two thirds of a
// thinning's time.
// It returns the primary and index rows it deleted, one index row per
// primary row, as every create writes them (in either form).
func (r *kindRun) thinDay(ctx context.Context, b store.PurgeBatch, index indexDeleter, t *store.DayTally, windows []policy.Window, outbox *outboxWriter) (rows, indexRows int64, err error) {
	prefer := policy.Prefer(r.kind)
	for _, span := range policy.Spans(t, windows) {
		deleted, err := b.ThinRows(ctx, r.primary.Name(), t.PartitionKey, span.From, span.To, span.Every, prefer)
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
			if err := index.delete(t.PartitionKey, rowKey); err != nil {
				return 0, 0, err
			}
		}
	}
	indexRows = rows
	return rows, indexRows, nil
}

// endSections is the last section's own work, in its batch: the index
// partitions before the sections' minute go by range, the index rows that
// range takes are counted (progress.IndexPending, credited is how
// many), and the job ends unless orphaned index rows are left to delete.
func (r *kindRun) endSections(b store.PurgeBatch, j *retention.Job, p *retention.KindProgress) (credited int64, err error) {
	if state(p).KeptBefore.Before(state(p).IndexBefore) {
		// A camera kept since the survey has rows before the minute the
		// sections left to the range deletion: the index rows there whose
		// primary rows went are deleted by the orphans pass instead, and
		// counted as it deletes them.
		toOrphans(p, false)
		return 0, nil
	}
	if err := b.DeletePartitions(r.index.Name(), images.ExpiredIndex(state(p).IndexBefore)); err != nil {
		return 0, err
	}
	credited, p.Counts.IndexRows, state(p).IndexPending = state(p).IndexPending, p.Counts.IndexRows+state(p).IndexPending, 0
	p.Phase = retention.PhaseDone
	if r.endsJob(j) {
		// The job's end and its marker's drop ride in this batch: two synced
		// writes fewer (finish sees it ended).
		r.env.End(j, nil)
		if _, err := b.Delete(r.env.RunningMarker(j.ID)); err != nil {
			return 0, err
		}
	}
	return credited, nil
}

// endsJob reports whether a last section that leaves this kind done ends
// j: every other kind is done too.
func (r *kindRun) endsJob(j *retention.Job) bool {
	for _, p := range j.Kinds {
		if p.Phase != retention.PhaseDone {
			return false
		}
	}
	return !j.DryRun
}

// deleteIndexRows deletes, by their derived keys, the index rows of a
// camera's day's rows between indexBefore (before which the index goes by
// range in the last section) and the camera's boundary, unread: a read per
// key was most of such a purge's time. It returns the day's index rows
// left to that range deletion and those it deleted, one per primary row,
// as every create writes them (in either form).
func (r *kindRun) deleteIndexRows(ctx context.Context, index indexDeleter, t *store.DayTally, indexBefore, boundary time.Time) (pending, deleted int64, err error) {
	pending = t.RowsBefore(store.MinTime(indexBefore, boundary))
	if !boundary.After(indexBefore) {
		return pending, 0, nil
	}
	start, end := store.MaxTime(indexBefore, t.Day), store.MinTime(boundary, t.Day.Add(24*time.Hour))
	if !start.Before(end) {
		return pending, 0, nil
	}
	err = r.eachRow(ctx, t.PartitionKey, start, end, []string{}, func(e store.Entity) error {
		return index.delete(t.PartitionKey, e.RowKey)
	})
	return pending, t.RowsBefore(end) - t.RowsBefore(start), err
}

// count reports whether the section counts the camera (purged or held):
// each camera once per job, though the last section meets every camera
// again and a resumed run's sections meet those of the runs before.
func (s *sectionScan) count(camera string) bool {
	if _, ok := s.counted[camera]; ok || !s.r.countable(camera) {
		return false
	}
	s.counted[camera] = struct{}{}
	return true
}

// countable says no committed section of the job counted the camera yet.
func (r *kindRun) countable(camera string) bool {
	_, ok := r.counted[camera]
	return !ok && camera >= r.countedBefore
}

// indexDeleter deletes a primary row's index row in a section's batch by
// its derived keys, unread: by this service's form alone when the index
// holds no row of the fleet's (store.PurgeBatch.InstantFirst, a store
// whose index was empty when first declared), else by both forms.
type indexDeleter struct {
	b       store.PurgeBatch
	r       *kindRun
	oneForm bool
}

func (x indexDeleter) delete(camera, rowKey string) error {
	if x.oneForm {
		k, ok := x.r.repo.IndexKey(camera, rowKey)
		if !ok {
			return nil // no capture instant: no index row either (IndexKeys)
		}
		return x.b.DeleteUnread(x.r.index.Name(), k)
	}
	for _, k := range x.r.repo.IndexKeys(camera, rowKey) {
		if err := x.b.DeleteUnread(x.r.index.Name(), k); err != nil {
			return err
		}
	}
	return nil
}
