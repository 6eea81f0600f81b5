package retention

import (
	"context"
	"errors"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// A plan's scan passes every expired index row, so on a backend that
// deletes partitions fenced it can also prepare the sweep: it takes a fence
// before it reads, counts the rows of each partition, and hands the sweep
// the partitions in chunks. The sweep then deletes each chunk's partitions
// whole, fenced by that fence, without reading them again: each expired
// index key is read once in a purge instead of twice.
//
// Why a partition unchanged since that fence may go whole: every row it
// held was there when the plan read it, so its camera is in a task, made
// after the fence; the sweep runs once every task deleted its camera's
// expired primary rows, which a transaction wrote with the index row,
// before the fence. The sweep takes this path only where that holds: a
// purge without policies (every camera met is planned), one plan scan
// from its start in this process (the fence lives in memory), creates in
// transactions (images.Repository.IndexLag is 0), every camera of every
// task done (none failed or held), and every row naming its camera. A
// write into a partition since the fence, an old image written late, makes
// the deletion refuse; the chunk is then swept by reading it, as without a
// plan (sweepRange), which keeps the late row until its primary row goes.

// sweepPlan is what a plan's scan prepared for the sweep of one kind.
type sweepPlan struct {
	fence  store.Fence
	chunks []plannedChunk
	// to ends the partitions the chunks cover, from the expired range's
	// start; the sweep reads the rest.
	to string
}

// plannedChunk is the index partitions [from, to) as the plan read them.
type plannedChunk struct {
	from, to   string
	partitions []string
	// rows is how many rows the partitions held.
	rows int64
	// whole is whether every row named its camera, so the sweep deletes
	// them all.
	whole bool
}

// sweepPlanKey names the sweep plan of one job's kind in Engine.sweepPlans.
type sweepPlanKey struct {
	job  string
	kind images.Kind
}

// sweepRecorder builds a sweepPlan from the plan's scan, within a memory
// limit: once its partition keys outgrow it, the chunks so far stay and the
// sweep reads the rest.
type sweepRecorder struct {
	plan     sweepPlan
	cur      plannedChunk
	maxRows  int64
	bytes    int
	limit    int
	stopped  bool
	lastPart string
}

// partitionBytes is what a recorded partition key costs against the limit.
func partitionBytes(pk string) int { return len(pk) + 16 }

func newSweepRecorder(fence store.Fence, from string, chunkRows, limit int) *sweepRecorder {
	return &sweepRecorder{plan: sweepPlan{fence: fence, to: from}, cur: plannedChunk{from: from, whole: true},
		maxRows: int64(chunkRows), limit: limit}
}

// row records one index row, in key order.
func (r *sweepRecorder) row(row images.IndexRow) {
	if r.stopped {
		return
	}
	if row.PartitionKey != r.lastPart {
		// A chunk ends on a partition boundary, so it names whole partitions.
		if r.cur.rows >= r.maxRows {
			r.end(row.PartitionKey)
		}
		if r.bytes += partitionBytes(row.PartitionKey); r.bytes > r.limit {
			r.stopped = true
			return
		}
		r.cur.partitions = append(r.cur.partitions, row.PartitionKey)
		r.lastPart = row.PartitionKey
	}
	r.cur.rows++
	if row.CameraID == "" {
		r.cur.whole = false // the sweep keeps such a row: no primary row to look for
	}
}

// end closes the current chunk before partition to.
func (r *sweepRecorder) end(to string) {
	if len(r.cur.partitions) > 0 {
		r.cur.to = to
		r.plan.chunks = append(r.plan.chunks, r.cur)
		r.plan.to = to
	}
	r.cur = plannedChunk{from: to, whole: true}
}

// done ends the scan of partitions up to to and returns the plan.
func (r *sweepRecorder) done(to string) *sweepPlan {
	if !r.stopped {
		r.end(to)
	}
	return &r.plan
}

// keepSweepPlan keeps a plan's sweep plan for the sweep of the same job and
// kind in this process; nil forgets any kept.
func (e *Engine) keepSweepPlan(job string, kind images.Kind, p *sweepPlan) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p == nil {
		delete(e.sweepPlans, sweepPlanKey{job, kind})
		return
	}
	e.sweepPlans[sweepPlanKey{job, kind}] = p
}

// takeSweepPlan returns and forgets the sweep plan kept for a job's kind.
func (e *Engine) takeSweepPlan(job string, kind images.Kind) *sweepPlan {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := sweepPlanKey{job, kind}
	p := e.sweepPlans[k]
	delete(e.sweepPlans, k)
	return p
}

// forgetSweepPlans drops the sweep plans of an ended job.
func (e *Engine) forgetSweepPlans(job string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.sweepPlans {
		if k.job == job {
			delete(e.sweepPlans, k)
		}
	}
}

// sweepPlanned sweeps the partitions a plan prepared: each chunk whose rows
// all go is deleted whole, fenced, else, or when the fence refuses, read
// and swept row by row. The partitions after the plan's end are read.
func (s *sweeper) sweepPlanned(ctx context.Context, p *sweepPlan, partitions store.Range) error {
	for _, c := range p.chunks {
		if err := s.sweepChunkPlanned(ctx, p.fence, c); err != nil {
			return err
		}
	}
	if p.to >= partitions.To {
		return nil
	}
	return s.sweepRange(ctx, store.Range{From: p.to, To: partitions.To})
}

func (s *sweeper) sweepChunkPlanned(ctx context.Context, fence store.Fence, c plannedChunk) error {
	chunkRange := store.Range{From: c.from, To: c.to}
	if !c.whole {
		return s.sweepRange(ctx, chunkRange)
	}
	s.step(stepJudged, chunkRange)
	in := sweepIntent{From: c.from, To: c.to, Rows: c.rows, Planned: true}
	if err := s.announce(ctx, in); err != nil {
		return err
	}
	s.step(stepAnnounced, chunkRange)
	if err := s.e.pace(ctx, s.job, c.rows); err != nil {
		return err
	}
	err := s.fencer.DeletePartitions(ctx, c.partitions, fence)
	if errors.Is(err, store.ErrConflict) {
		// Written since the plan read it: nothing was deleted, the intent
		// goes, and the chunk is swept by reading it.
		if err := s.commit(ctx, in, 0); err != nil {
			return err
		}
		return s.sweepRange(ctx, chunkRange)
	}
	if err != nil {
		return err
	}
	s.step(stepDeleted, chunkRange)
	return s.commit(ctx, in, in.Rows)
}
