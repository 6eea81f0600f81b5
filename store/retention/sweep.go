package retention

import (
	"context"
	"errors"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// sweepIntent announces a chunk of index deletes before it runs: the index
// rows of partitions [From, To) that qualify (see sweeper.qualifies), Rows
// of them. The count is committed with the intent's removal, after the
// deletes; a crash in between replays the intent, whose deletes are
// idempotent and whose count was fixed before any of them ran.
type sweepIntent struct {
	From string `json:"from"`
	To   string `json:"to"`
	Rows int64  `json:"rows"`
}

// indexDelete is one delete of the sweep: of a row at the ETag it was read.
type indexDelete struct {
	store.Key
	IfMatch string
}

// sweeper deletes the index rows of one kind whose primary rows are gone.
// It holds a constant: two instants and the cameras that failed, at most
// Options.CameraMemory of them.
type sweeper struct {
	e       *Engine
	job     *Job
	kind    images.Kind
	repo    *images.Repository
	primary store.Table
	index   store.Table
	// failed are the cameras the work phase could not purge, or spared
	// for a legal hold placed after planning: they keep their index rows.
	failed *cameraSet
	// bounds, in a purge with policies, tells the boundary each camera
	// got; zero for a camera not planned, whose rows all stay.
	bounds *boundaryCache
	// trusted is the instant before which an index row of an expired
	// partition, written then, qualifies without a look at its primary
	// row: the plan met it, and its primary row landed before its camera
	// was counted, in the range deleted since.
	trusted time.Time
	// settled is the backend's time at the sweep's start less the kind's
	// images.Repository.IndexLag: an index row written before it has its
	// primary row by now, or never will.
	settled time.Time
}

func (e *Engine) sweep(ctx context.Context, j *Job, kind images.Kind) error {
	repo := e.repos[kind]
	primary, index := repo.Tables()
	lag := repo.IndexLag()
	firstCount := j.progress(kind).PlannedAt
	failed := newCameraSet(e.opts.CameraMemory)
	err := e.tasks.each(ctx, j.ID, kind, func(t *task) error {
		if !t.CountedAt.IsZero() && (firstCount.IsZero() || t.CountedAt.Before(firstCount)) {
			firstCount = t.CountedAt
		}
		for _, d := range t.Devices {
			if d.State == deviceFailed || d.State == deviceHeld {
				failed.add(d.ID)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if failed.full() {
		e.log.Warn("purge: too many cameras failed to tell their index rows apart; the next purge deletes them",
			"job", j.ID, "kind", kind.String())
		return nil
	}
	// The backend's own clock, read from a write, dates the start: the
	// index rows' timestamps are on that clock, whatever this process's says.
	_, started, err := e.jobs.updateStamped(ctx, j.ID, func(*Job) error { return nil })
	if err != nil {
		return err
	}
	s := &sweeper{e: e, job: j, kind: kind, repo: repo, primary: primary, index: index, failed: failed,
		trusted: firstCount.Add(-e.opts.IndexGrace - lag), settled: started.Add(-lag)}
	if j.UsePolicies {
		s.bounds = &boundaryCache{tasks: &e.tasks, job: j.ID, kind: kind, known: newCameraBounds(e.opts.CameraMemory)}
	}
	if in := j.progress(kind).Intent; in != nil {
		if err := s.replay(ctx, *in); err != nil {
			return err
		}
	}
	return s.sweepRange(ctx, images.ExpiredIndex(j.boundary(kind)))
}

// Steps of the sweep, where a test may interleave writes (Engine.sweepHook).
type sweepStep string

const (
	// stepScanned: a page of index rows read, before they are judged.
	stepScanned sweepStep = "scanned"
	// stepJudged: a chunk's rows judged, before its intent is announced.
	stepJudged sweepStep = "judged"
	// stepAnnounced: a chunk's intent recorded, before its deletes.
	stepAnnounced sweepStep = "announced"
	// stepDeleted: a chunk's rows deleted, before its count is committed.
	stepDeleted sweepStep = "deleted"
)

// sweepSteps lists every step, in the order a chunk meets them.
var sweepSteps = []sweepStep{stepScanned, stepJudged, stepAnnounced, stepDeleted}

func (s *sweeper) step(step sweepStep, partitions store.Range) { s.e.step(step, partitions) }

func (e *Engine) step(step sweepStep, partitions store.Range) {
	if e.sweepHook != nil {
		e.sweepHook(step, partitions)
	}
}

// sweepChunk is the partitions [from, next partition) of one intent.
type sweepChunk struct {
	from string
	// deletes are every qualifying row of the chunk.
	deletes []indexDelete
}

// sweepRange deletes the qualifying index rows of the partitions, a chunk
// of whole partitions at a time, reading each row's key once, each row at
// the ETag it was read with: an image written late into a partition keeps
// its index row for the next purge.
func (s *sweeper) sweepRange(ctx context.Context, partitions store.Range) error {
	chunk := &sweepChunk{}
	var cur string
	var curDeletes []indexDelete
	// next ends cur, the partition before the one starting with key.
	next := func(key string) error {
		if cur != "" {
			chunk.deletes = append(chunk.deletes, curDeletes...)
		}
		// A chunk ends on a partition boundary, so its intent names whole partitions.
		if len(chunk.deletes) >= s.e.opts.SweepChunk || key == partitions.To {
			if err := s.flush(ctx, chunk, key); err != nil {
				return err
			}
			chunk = &sweepChunk{from: key}
		}
		cur, curDeletes = key, nil
		return nil
	}
	scan := s.repo.ScanIndex(partitions, 0)
	for {
		rows, more, err := scan.Next(ctx)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			s.step(stepScanned, store.Range{From: rows[0].PartitionKey, To: rows[len(rows)-1].PartitionKey})
		}
		for _, row := range rows {
			if row.PartitionKey != cur {
				if err := next(row.PartitionKey); err != nil {
					return err
				}
			}
			ok, err := s.qualifies(ctx, row)
			if err != nil {
				return err
			}
			if ok {
				curDeletes = append(curDeletes, deleteOf(row))
			}
		}
		if !more {
			return next(partitions.To)
		}
	}
}

// flush announces, runs and commits the deletes of a chunk ending before
// partition to.
func (s *sweeper) flush(ctx context.Context, c *sweepChunk, to string) error {
	if len(c.deletes) == 0 {
		return nil
	}
	s.step(stepJudged, store.Range{From: c.deletes[0].PartitionKey, To: to})
	return s.apply(ctx, sweepIntent{From: c.from, To: to, Rows: int64(len(c.deletes))}, c)
}

// qualifies reports whether an expired index row may go: its camera's
// primary rows were deleted, and its own primary row is gone for good.
//
// Without a transaction a create writes its index row first and its primary
// row up to IndexLag later (images.Options.CreateTimeout bounds it), so an
// index row younger than that, by the backend's clock, may still get its
// primary row: it stays for the next purge, even if its primary row is not
// there now. Rows written well before the plan began and before any camera
// was counted (by IndexGrace, the skew between this process's clock and
// the backend's) were met by the plan, and their primary row landed before
// their camera's count, in the deleted range; the others may belong to a
// camera the plan missed or to a primary row written after the count, and
// are checked one by one, after the moment their primary row could land.
func (s *sweeper) qualifies(ctx context.Context, row images.IndexRow) (bool, error) {
	device := row.CameraID
	if device == "" {
		return false, nil // no primary row to look for
	}
	if _, failed := s.failed.ids[device]; failed {
		return false, nil // a failed camera keeps its index rows for the next purge
	}
	if s.bounds != nil {
		// Only where the work deleted the camera's primary rows: before
		// the boundary recorded for it, never for a camera not planned.
		b, err := s.bounds.boundary(ctx, device)
		if err != nil || b.IsZero() || !expiredFor(row, b) {
			return false, err
		}
	}
	if !row.Timestamp.Before(s.settled) {
		return false, nil // its primary row may still land
	}
	if row.Timestamp.Before(s.trusted) {
		return true, nil
	}
	if row.RowKey == "" {
		return true, nil
	}
	_, err := s.primary.Get(ctx, device, row.RowKey)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// deleteOf deletes an index row as the sweep read it, never a version
// written since: a retried create that rewrites the row between the sweep's
// check of its primary row and the delete keeps it, with the primary row it
// writes next, for the next purge.
func deleteOf(row images.IndexRow) indexDelete {
	return indexDelete{Key: row.Key, IfMatch: row.ETag}
}

// apply announces, runs and commits one chunk of index deletes. A row
// rewritten since the sweep read it stays; the intent is announced again
// without it before the rest are deleted, so its count stays what is
// deleted.
func (s *sweeper) apply(ctx context.Context, in sweepIntent, c *sweepChunk) error {
	if err := s.announce(ctx, in); err != nil {
		return err
	}
	chunkRange := store.Range{From: in.From, To: in.To}
	if len(c.deletes) > 0 {
		chunkRange.From = c.deletes[0].PartitionKey
	}
	s.step(stepAnnounced, chunkRange)
	if err := s.e.pace(ctx, s.job, int64(len(c.deletes))); err != nil {
		return err
	}
	deletes := c.deletes
	kept := func() error {
		in.Rows--
		return s.announce(ctx, in)
	}
	if err := deleteIndexRows(ctx, s.index, deletes, kept); err != nil {
		return err
	}
	s.step(stepDeleted, chunkRange)
	return s.commit(ctx, in, in.Rows)
}

// announce records the intent of a chunk about to be deleted, unless the
// job was cancelled between chunks: a chunk announced runs to its end.
func (s *sweeper) announce(ctx context.Context, in sweepIntent) error {
	_, err := s.e.updateJob(ctx, s.job.ID, func(j *Job) error {
		if j.CancelRequested && j.progress(s.kind).Intent == nil {
			return errCancelled
		}
		j.progress(s.kind).Intent = &in
		return nil
	})
	return err
}

// commit clears the intent of a chunk deleted, counting its rows deleted.
// Only the write that clears the intent counts it: a retried update whose
// first attempt landed finds it cleared already.
func (s *sweeper) commit(ctx context.Context, in sweepIntent, rows int64) error {
	_, err := s.e.updateJob(ctx, s.job.ID, func(j *Job) error {
		p := j.progress(s.kind)
		if p.Intent != nil && *p.Intent == in {
			p.Counts.IndexRows += rows
			p.Intent = nil
		}
		return nil
	})
	return err
}

// replay finishes an intent a crash interrupted: the rows of its partitions
// that qualify now are the ones it announced and had not deleted yet.
func (s *sweeper) replay(ctx context.Context, in sweepIntent) error {
	var deletes []indexDelete
	err := s.repo.EachIndexRow(ctx, store.Range{From: in.From, To: in.To}, func(row images.IndexRow) error {
		ok, err := s.qualifies(ctx, row)
		if ok {
			deletes = append(deletes, deleteOf(row))
		}
		return err
	})
	if err != nil {
		return err
	}
	return s.apply(ctx, in, &sweepChunk{from: in.From, deletes: deletes})
}

// deleteIndexRows deletes index rows, each at the ETag it was read with, in
// batches of up to 100 per partition. A row rewritten since is left, after
// kept is told.
func deleteIndexRows(ctx context.Context, t store.Table, deletes []indexDelete, kept func() error) error {
	for start := 0; start < len(deletes); {
		end := start
		for end < len(deletes) && end-start < store.MaxBatchOps && deletes[end].PartitionKey == deletes[start].PartitionKey {
			end++
		}
		ops := make([]store.Op, end-start)
		for i, d := range deletes[start:end] {
			ops[i] = store.Op{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: d.PartitionKey, RowKey: d.RowKey}, IfMatch: d.IfMatch}
		}
		if err := deleteOps(ctx, t, ops, kept); err != nil {
			return err
		}
		start = end
	}
	return nil
}
