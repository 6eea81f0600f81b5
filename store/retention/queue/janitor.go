package queue

import (
	"context"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// janitor deletes, once a kind's tasks are done, the orphaned index rows of
// its expired partitions: those whose primary row is gone and which are
// older than the kind's images.Repository.IndexLag, each conditionally at
// the ETag it was read with. The workers deleted their rows' index rows
// already; what is left to it are the index rows a crash left between a
// batch's primary and index deletes (counted with their primary rows), and
// those of creates that gave up after their index row (never counted).
// Younger index rows may still get their primary row and stay for the next
// purge; so does a row rewritten since it was read.
//
// The janitor counts nothing: each row it deletes was either counted with
// its primary row or never had one, and counting only what nothing counts
// would need to know which, and a record per delete to survive a crash.
// It reads each candidate's primary row, so it skips the rows of the
// cameras that failed or were held, which keep their primary rows, and in
// a purge with policies the rows of cameras not purged there.
func (e *driver) janitor(ctx context.Context, j *retention.Job, kind images.Kind) error {
	if e.hooks.Janitor != nil {
		e.hooks.Janitor(j.ID, kind)
	}
	repo := e.repos[kind]
	_, index := repo.Tables()
	kept := newCameraSet(e.tune.CameraMemory)
	if err := e.tasks.each(ctx, j.ID, kind, func(t *task) error {
		for _, d := range t.Devices {
			if (d.State == deviceFailed || d.State == deviceHeld) && !kept.full() {
				kept.add(d.ID)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	// The backend's own clock, read from a write, dates the start: the
	// index rows' timestamps are on that clock, whatever this process's
	// says.
	_, now, err := e.env.UpdateJobStamped(ctx, j.ID, func(*retention.Job) error { return nil })
	if err != nil {
		return err
	}
	jn := &janitorRun{e: e, job: j, repo: repo, index: index, kept: kept, settled: now.Add(-repo.IndexLag())}
	if j.UsePolicies {
		jn.bounds = &boundaryCache{tasks: &e.tasks, job: j.ID, kind: kind, known: newCameraBounds(e.tune.CameraMemory)}
	}
	if err := jn.run(ctx, repo.ScanIndex(images.ExpiredIndex(j.Reach(kind)), 0)); err != nil {
		return err
	}
	if jn.deleted > 0 || jn.unjudged > 0 {
		e.log.Info("purge: orphaned index rows deleted", "job", j.ID, "kind", kind.String(),
			"rows", jn.deleted, "unjudged", jn.unjudged)
	}
	return nil
}

// janitorRun is one janitor pass over one kind's expired index partitions.
type janitorRun struct {
	e     *driver
	job   *retention.Job
	repo  *images.Repository
	index store.Table
	// kept are cameras the work did not delete (failed, held), up to
	// Options.CameraMemory of them; a kept camera beyond it costs a read
	// per row, which finds its primary row.
	kept *cameraSet
	// bounds, in a purge with policies, tells the boundary each camera got.
	bounds *boundaryCache
	// settled is the backend's time at the start less IndexLag: an index
	// row written before it has its primary row by now, or never will.
	settled time.Time
	// deleted and unjudged are for the log: rows deleted, rows whose
	// primary row could not be read and which stay.
	deleted, unjudged int64
}

// run deletes the orphans a scan finds, a batch of one partition (up to
// 100 rows) at a time, so that its memory is one page and one batch.
func (jn *janitorRun) run(ctx context.Context, scan *images.IndexScan) error {
	var batch []store.Op
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := jn.e.pace(ctx, jn.job, int64(len(batch))); err != nil {
			return err
		}
		n := int64(len(batch))
		err := store.BatchDeletes(ctx, jn.index, batch, func() error { n--; return nil })
		batch = batch[:0]
		jn.deleted += n
		return err
	}
	for {
		rows, more, err := scan.Next(ctx)
		if err != nil {
			return err
		}
		for _, row := range rows {
			orphan, err := jn.orphan(ctx, row)
			if err != nil {
				return err
			}
			if !orphan {
				continue
			}
			if len(batch) > 0 && (batch[0].Entity.PartitionKey != row.PartitionKey || len(batch) >= store.MaxBatchOps) {
				if err := flush(); err != nil {
					return err
				}
			}
			// At the ETag read: a retried create that rewrote the row since
			// keeps it, with the primary row it writes next.
			batch = append(batch, store.Op{Kind: store.OpDelete,
				Entity: store.Entity{PartitionKey: row.PartitionKey, RowKey: row.Key.RowKey}, IfMatch: row.ETag})
		}
		if !more {
			return flush()
		}
	}
}

// orphan reports whether an expired index row may go: it is settled and
// its primary row is gone. A row whose primary row cannot be read stays,
// so that one failing partition does not fail the job.
func (jn *janitorRun) orphan(ctx context.Context, row images.IndexRow) (bool, error) {
	camera := row.CameraID
	if camera == "" || !row.Timestamp.Before(jn.settled) {
		return false, nil
	}
	if _, kept := jn.kept.ids[camera]; kept {
		return false, nil
	}
	if jn.bounds != nil {
		b, err := jn.bounds.boundary(ctx, camera)
		if err != nil || b.IsZero() || !expiredFor(row, b) {
			return false, err
		}
	}
	orphaned, err := jn.repo.Orphaned(ctx, row)
	if err != nil && ctx.Err() == nil {
		jn.unjudged++
		return false, nil
	}
	return orphaned, err
}
