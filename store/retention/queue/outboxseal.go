package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// The outbox of the queue design (Azure's, docs/blobs.md). No transaction
// spans a camera's partition and the outbox, so:
//
//   - a job's outbox rows live in a partition of their own, the job's id,
//     keyed by the deleted row (kind, camera, row key), so that writing one
//     again writes the same row. A worker writes a batch's rows pending
//     before it deletes the batch and marks them ready after. The pending
//     batch also updates the job's open row, which Start wrote: once the
//     job is sealing, that row is gone and no new pending row can land, so
//     the worker deletes nothing (its cameras fail and keep their rows).
//   - when the job ends, its pending rows (a crash between the two writes
//     left them) are reconciled: a row whose primary row is gone becomes
//     ready, one whose primary row is there was never deleted and goes.
//   - then the job is sealed: one transaction in the seals partition
//     updates the counter at the ETag read and inserts the seal row, keyed
//     by the next number, and the job's row, which makes a second seal of
//     the job fail. Numbers are allocated with their seal, so they have no
//     gaps: a reader reads the seals in order and each job's ready rows in
//     key order, its token (seal, last row key read).
//
// A delivery that lost its task (a process stalled past the visibility
// timeout) may wake to delete a batch whose pending rows the job's end
// dropped as not deleted: the reconciliation fences each row it keeps
// (fence), and a delivery deletes only at the ETags it read, so such a
// batch deletes nothing. A row is named once it is gone, and only then.

// Rows of the queue design's outbox, in DefaultOutboxTable: the seals in
// sealPart (seal rows keyed by retention.SeqKey, hex, below "g"), each job's rows
// in the job's partition (job ids are 16 hex digits, the embedded outbox's
// partitions one letter).
const (
	sealPart      = "seals"
	sealRowsEnd   = "g"
	sealNextRow   = "next"
	sealTrimRow   = "trimmed"
	sealJobPrefix = "job-"
	openRow       = "open"
	propReady     = "Ready"
	propOpen      = "Open"
	propRow       = "Row"
	propSealedAt  = "SealedAt"
	propSealJob   = "JobId"
)

// jobOutbox writes the outbox rows of one job's deletes of one kind.
type jobOutbox struct {
	table store.Table
	job   string
	kind  images.Kind
	now   func() time.Time
	// beforeDelete, set by tests only, runs between a batch's pending
	// write and its delete.
	beforeDelete func(rows []store.Entity)
}

// jobOutbox is the outbox a task's deletes write to; nil when its job
// keeps none.
func (e *driver) jobOutbox(j *retention.Job, kind images.Kind) *jobOutbox {
	if e.outbox == nil || !j.Outbox {
		return nil
	}
	o := &jobOutbox{table: e.outbox, job: j.ID, kind: kind, now: e.opts.Now}
	if e.hooks.Delete != nil {
		o.beforeDelete = func(rows []store.Entity) { e.hooks.Delete(j.ID, rows) }
	}
	return o
}

// batchRows is how many primary rows one delete batch takes: one fewer with
// an outbox, whose pending batch carries the open row too.
func (o *jobOutbox) batchRows() int {
	if o == nil {
		return store.MaxBatchOps
	}
	return store.MaxBatchOps - 1
}

// errOutboxSealed fails a delete whose job's outbox is sealing.
var errOutboxSealed = errors.New("retention: the job's outbox of deleted images is sealed")

func outboxRowKey(kind images.Kind, camera, row string) string {
	return fmt.Sprintf("%d_%s_%s", kind, camera, row)
}

// pending writes, before a batch of a camera's rows is deleted, their
// outbox rows marked pending.
func (o *jobOutbox) pending(ctx context.Context, camera string, rows []store.Entity) error {
	if o == nil {
		return nil
	}
	at := o.now().UTC()
	ops := make([]store.Op, 0, len(rows)+1)
	for _, r := range rows {
		captured, err := store.TimeFromInvertedTicksRowKey(r.RowKey)
		if err != nil {
			continue // not an image's row
		}
		blob, _ := r.Properties[images.PropBlobURI].(string)
		props := retention.DeletedImageProperties(retention.DeletedImage{Kind: o.kind, CameraID: camera, CapturedAt: captured,
			BlobURI: blob, DeletedAt: at})
		props[propRow], props[propReady] = r.RowKey, false
		k := store.Key{PartitionKey: o.job, RowKey: outboxRowKey(o.kind, camera, r.RowKey)}
		ops = append(ops, store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{PartitionKey: k.PartitionKey, RowKey: k.RowKey,
			Properties: props}})
	}
	if len(ops) == 0 {
		return nil
	}
	ops = append(ops, store.Op{Kind: store.OpUpdate, Mode: store.Merge,
		Entity: store.Entity{PartitionKey: o.job, RowKey: openRow, Properties: store.Properties{propOpen: true}}})
	err := o.table.Batch(ctx, ops)
	var be *store.BatchError
	if errors.As(err, &be) && be.Index == len(ops)-1 && errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: job %s", errOutboxSealed, o.job)
	}
	return err
}

// ready marks ready the outbox rows of a camera's rows that a batch
// deleted (gone, by primary row key); one the job's reconciliation took
// away meanwhile, or that was never recorded, is left out.
func (o *jobOutbox) ready(ctx context.Context, camera string, gone map[string]bool) error {
	if o == nil || len(gone) == 0 {
		return nil
	}
	ops := make([]store.Op, 0, len(gone))
	for row := range gone {
		ops = append(ops, store.Op{Kind: store.OpUpdate, Mode: store.Merge,
			Entity: store.Entity{PartitionKey: o.job, RowKey: outboxRowKey(o.kind, camera, row), Properties: store.Properties{propReady: true}}})
	}
	return store.BatchDeletes(ctx, o.table, ops, nil)
}

// openJobOutbox writes the open row of a job that keeps an outbox.
func (e *driver) openJobOutbox(ctx context.Context, j *retention.Job) error {
	if !j.Outbox {
		return nil
	}
	_, err := e.outbox.Upsert(ctx, store.Entity{PartitionKey: j.ID, RowKey: openRow}, store.Replace)
	return err
}

// closeJobOutbox deletes the open row of a job that keeps an outbox: no
// pending row lands in it after.
func (e *driver) closeJobOutbox(ctx context.Context, j *retention.Job) error {
	if !j.Outbox {
		return nil
	}
	if err := e.outbox.Delete(ctx, j.ID, openRow, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// sealJobOutbox closes an ending job's outbox, reconciles its pending rows
// and seals it; each step is idempotent, so an end retried after a crash
// does them again.
func (e *driver) sealJobOutbox(ctx context.Context, id string) error {
	if e.outbox == nil {
		return nil
	}
	j, err := e.env.Job(ctx, id)
	if err != nil || !j.Outbox {
		return err
	}
	if err := e.closeJobOutbox(ctx, j); err != nil {
		return err
	}
	if err := e.reconcileOutbox(ctx, id); err != nil {
		return err
	}
	return e.seal(ctx, id)
}

// reconcileOutbox settles the job's pending rows by their primary rows.
func (e *driver) reconcileOutbox(ctx context.Context, id string) error {
	q := store.Query{PartitionKey: id, Where: []store.Equal{{Property: propReady, Value: false}}}
	for {
		page, err := e.outbox.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, r := range page.Entities {
			d := retention.DeletedImageFrom(r)
			kind, camera := d.Kind, d.CameraID
			row, _ := r.Properties[propRow].(string)
			repo, ok := e.repos[kind]
			if !ok {
				continue
			}
			primary, _ := repo.Tables()
			gone, err := fence(ctx, primary, camera, row)
			switch {
			case err != nil:
			case gone:
				_, err = e.outbox.Update(ctx, store.Entity{PartitionKey: id, RowKey: r.RowKey, Properties: store.Properties{propReady: true}}, store.Merge, r.ETag)
			default:
				err = e.outbox.Delete(ctx, id, r.RowKey, r.ETag)
			}
			// A conflict is a worker's mark of the row ready: its delete went.
			if err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		q.Resume = page.Next
	}
}

// fence settles a pending row's primary row: gone, or kept for good by
// this job. A delivery that wrote the row pending and stalled may still
// delete it, so a row still there is written again (a merge of nothing),
// which changes its ETag: that delivery deletes only at the ETag it read
// (deleteRead), so it now deletes nothing, and the row is rightly dropped
// from the outbox. Without the fence it could delete the row after its
// outbox row was dropped, and the image would never be named.
func fence(ctx context.Context, primary store.Table, camera, row string) (gone bool, err error) {
	for {
		e, err := primary.Get(ctx, camera, row)
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		_, err = primary.Update(ctx, store.Entity{PartitionKey: camera, RowKey: row}, store.Merge, e.ETag)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, store.ErrNotFound):
			return true, nil
		case !errors.Is(err, store.ErrConflict):
			return false, err
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
	}
}

// seal gives the job's outbox, if it has a ready row, the next seal.
func (e *driver) seal(ctx context.Context, id string) error {
	q := store.Query{PartitionKey: id, Where: []store.Equal{{Property: propReady, Value: true}}, Limit: 1}
	for {
		page, err := e.outbox.Query(ctx, q)
		if err != nil {
			return err
		}
		if len(page.Entities) > 0 {
			break
		}
		if page.Next == nil {
			return nil // nothing deleted: nothing to read
		}
		q.Resume = page.Next
	}
	for {
		switch _, err := e.outbox.Get(ctx, sealPart, sealJobPrefix+id); {
		case err == nil:
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		counter := store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: sealPart, RowKey: sealNextRow}}
		seq := uint64(1)
		switch c, err := e.outbox.Get(ctx, sealPart, sealNextRow); {
		case err == nil:
			seq = retention.SeqOf(c) + 1
			counter = store.Op{Kind: store.OpUpdate, Mode: store.Replace, IfMatch: c.ETag, Entity: counter.Entity}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		counter.Entity.Properties = retention.SeqProperties(seq)
		at := e.opts.Now().UTC()
		err := e.outbox.Batch(ctx, []store.Op{counter,
			{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: sealPart, RowKey: retention.SeqKey(seq),
				Properties: store.Properties{propSealJob: id, propSealedAt: at}}},
			{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: sealPart, RowKey: sealJobPrefix + id,
				Properties: retention.SeqProperties(seq)}},
		})
		// Another job sealed first (or this one, by an attempt whose answer
		// was lost): read again.
		if err == nil || !(errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists)) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// sealToken is a position in the sealed outbox: every seal before seq
// read, and of seq's job the rows up to row (none when empty).
type sealToken struct {
	seq uint64
	row string
}

func (t sealToken) String() string { return strconv.FormatUint(t.seq, 10) + "." + t.row }

func parseSealToken(s string) (sealToken, error) {
	n, row, ok := strings.Cut(s, ".")
	seq, err := strconv.ParseUint(n, 10, 64)
	if !ok || err != nil || seq == 0 {
		return sealToken{}, fmt.Errorf("%w: %q", retention.ErrBadResumeToken, s)
	}
	return sealToken{seq: seq, row: row}, nil
}

// sealedImages is DeletedImages of the queue design's outbox.
func (e *driver) sealedImages(ctx context.Context, after string, limit int) ([]retention.DeletedImage, error) {
	first := uint64(1)
	switch trim, err := e.outbox.Get(ctx, sealPart, sealTrimRow); {
	case err == nil:
		first = max(retention.SeqOf(trim), 1)
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	pos := sealToken{seq: first}
	if after != "" {
		var err error
		if pos, err = parseSealToken(after); err != nil {
			return nil, err
		}
		if pos.seq < first {
			return nil, fmt.Errorf("%w: seal %d, retired through %d", retention.ErrOutboxTrimmed, pos.seq, first-1)
		}
	}
	limit = min(max(limit, 1), store.MaxPageSize)
	var out []retention.DeletedImage
	q := store.Query{PartitionKey: sealPart, Rows: store.Range{From: retention.SeqKey(pos.seq), To: sealRowsEnd}, Limit: 100}
	for {
		seals, err := e.outbox.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, s := range seals.Entities {
			seq, err := strconv.ParseUint(s.RowKey, 16, 64)
			if err != nil {
				continue
			}
			if seq != pos.seq {
				pos = sealToken{seq: seq}
			}
			job, _ := s.Properties[propSealJob].(string)
			if out, err = e.readSealed(ctx, job, pos, out, limit); err != nil || len(out) == limit {
				return out, err
			}
			pos = sealToken{seq: seq + 1}
		}
		if seals.Next == nil {
			if len(out) == 0 && after != "" {
				return nil, e.checkSealAhead(ctx, pos)
			}
			return out, nil
		}
		q.Resume = seals.Next
	}
}

// checkSealAhead reports, of a position after which nothing is sealed, an
// *retention.AheadError if no seal gave it out: a token of a seal beyond the next,
// or of a row of the next, which has none yet.
func (e *driver) checkSealAhead(ctx context.Context, pos sealToken) error {
	var last uint64
	switch c, err := e.outbox.Get(ctx, sealPart, sealNextRow); {
	case err == nil:
		last = retention.SeqOf(c)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if pos.seq > last+1 || (pos.seq == last+1 && pos.row != "") {
		return &retention.AheadError{Token: pos.String(), End: sealToken{seq: last + 1}.String()}
	}
	return nil
}

// readSealed appends to out, up to limit, the ready rows of a sealed job
// after pos. Once it reads the job's last row, that row's token is the
// next seal's start.
func (e *driver) readSealed(ctx context.Context, job string, pos sealToken, out []retention.DeletedImage, limit int) ([]retention.DeletedImage, error) {
	q := store.Query{PartitionKey: job, Rows: store.Range{From: pos.row},
		Where: []store.Equal{{Property: propReady, Value: true}}}
	first := len(out) // out[first:] are this job's
	for {
		q.Limit = min(limit-len(out)+1, store.MaxPageSize)
		page, err := e.outbox.Query(ctx, q)
		if err != nil {
			return out, err
		}
		for _, r := range page.Entities {
			if r.RowKey == pos.row {
				continue
			}
			if len(out) == limit {
				return out, nil
			}
			d := retention.DeletedImageFrom(r)
			d.Token = sealToken{seq: pos.seq, row: r.RowKey}.String()
			if !strings.HasPrefix(job, deletePrefix) { // an image deleted on purpose has no job
				d.JobID = job
			}
			out = append(out, d)
		}
		if page.Next == nil {
			if n := len(out); n > first {
				out[n-1].Token = sealToken{seq: pos.seq + 1}.String()
			}
			return out, nil
		}
		q.Resume = page.Next
	}
}

// retireSeals retires the sealed jobs sealed before cutoff, oldest first:
// the first seal kept goes first, so a reader behind it learns its rows
// are gone, then the job's rows, then its seal.
func (e *driver) retireSeals(ctx context.Context, cutoff time.Time) (int, error) {
	n := 0
	q := store.Query{PartitionKey: sealPart, Rows: store.Range{To: sealRowsEnd}, Limit: 100}
	for {
		page, err := e.outbox.Query(ctx, q)
		if err != nil {
			return n, err
		}
		for _, s := range page.Entities {
			if at, _ := s.Properties[propSealedAt].(time.Time); !at.Before(cutoff) {
				return n, nil
			}
			seq, _ := strconv.ParseUint(s.RowKey, 16, 64)
			job, _ := s.Properties[propSealJob].(string)
			if _, err := e.outbox.Upsert(ctx, store.Entity{PartitionKey: sealPart, RowKey: sealTrimRow,
				Properties: retention.SeqProperties(seq + 1)}, store.Replace); err != nil {
				return n, err
			}
			rows, err := deleteQueried(ctx, e.outbox, job, store.Range{})
			n += int(rows)
			if err != nil {
				return n, err
			}
			if err := store.BatchDeletes(ctx, e.outbox, []store.Op{
				{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: sealPart, RowKey: s.RowKey}},
				{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: sealPart, RowKey: sealJobPrefix + job}},
			}, nil); err != nil {
				return n, err
			}
		}
		if page.Next == nil {
			return n, nil
		}
		q.Resume = page.Next
	}
}
