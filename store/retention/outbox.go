package retention

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// The outbox of deleted images (docs/blobs.md): with Options.Outbox, every
// section of an embedded purge that deletes rows writes, in its own
// exclusive batch, one outbox row per deleted image (its blob URI above
// all) and the outbox's next sequence number. The deletion and its outbox
// rows commit together or not at all, so each deleted image is in the
// outbox exactly once whatever crashes, and an image not deleted (held,
// spared) never is. Rows are keyed by that sequence, so a position in the
// outbox is a resume token for its readers (WatchDeletedImages).

// DefaultOutboxTable is the outbox's table.
const DefaultOutboxTable = "DeletedImages"

// ErrOutboxTrimmed reports a read from a position the outbox no longer
// holds: its rows were retired (Options.JobRetention).
var ErrOutboxTrimmed = errors.New("retention: the deleted images from that position were retired")

// ErrOutboxAhead reports a read from a position past the outbox's end: a
// position of another store, or of this one before it was restored from
// an older backup, whose records after the backup are lost. Reading from
// it would skip the new records up to it, so it is refused; an
// *AheadError names where to resume.
var ErrOutboxAhead = errors.New("retention: that position is past the end of the deleted images")

// AheadError is the ErrOutboxAhead of a read: End is the token of the last
// position the outbox holds from the store's own history (the backup's end
// after a restore), from which a reader that had read all before it misses
// no new record.
type AheadError struct {
	Token, End string
}

func (e *AheadError) Error() string {
	return fmt.Sprintf("%v: %q, the outbox ends at %q", ErrOutboxAhead, e.Token, e.End)
}

// Is makes an AheadError an ErrOutboxAhead.
func (e *AheadError) Is(target error) bool { return target == ErrOutboxAhead }

// outboxSectionRows bounds the rows of a section that fills the outbox: it
// reads each deleted row and writes one more, so its batch grows with them.
const outboxSectionRows = 20_000

// Outbox rows: the images in partition outboxPart keyed by sequence, the
// next sequence and the retired one in outboxMetaPart.
const (
	outboxPart     = "d"
	outboxMetaPart = "m"
	outboxNextRow  = "next"
	outboxTrimRow  = "trimmed"
	propSeq        = "Seq"
	propKind       = "Kind"
	propJob        = "JobId"
	propDeletedAt  = "DeletedAt"
)

// DeletedImage is one image a purge or thinning pass deleted.
type DeletedImage struct {
	// Seq is its position in the embedded store's outbox, from 1; 0 in
	// the queue design's.
	Seq uint64
	// Token is the position after it, for DeletedImages' after.
	Token      string
	Kind       images.Kind
	CameraID   string
	CapturedAt time.Time
	BlobURI    string
	JobID      string
	DeletedAt  time.Time
}

func outboxKey(seq uint64) string { return fmt.Sprintf("%016x", seq) }

func seqOf(e store.Entity, prop string) uint64 {
	n, _ := e.Properties[prop].(int64)
	return uint64(n)
}

// outboxWriter stages one section's outbox rows in its batch.
type outboxWriter struct {
	table store.Table
	b     store.PurgeBatch
	job   string
	kind  images.Kind
	at    time.Time
	next  uint64 // 0 until read
	wrote bool
}

// add stages the outbox row of a primary row the section deletes.
func (w *outboxWriter) add(ctx context.Context, camera string, row store.Entity) error {
	if w.next == 0 {
		e, err := w.table.Get(ctx, outboxMetaPart, outboxNextRow)
		switch {
		case errors.Is(err, store.ErrNotFound):
			w.next = 1
		case err != nil:
			return err
		default:
			w.next = max(seqOf(e, propSeq), 1)
		}
	}
	captured, err := store.TimeFromInvertedTicksRowKey(row.RowKey)
	if err != nil {
		return nil // not an image's row: never tallied, never deleted by range
	}
	blob, _ := row.Properties[images.PropBlobURI].(string)
	_, err = w.b.Put(w.table.Name(), store.Entity{PartitionKey: outboxPart, RowKey: outboxKey(w.next), Properties: store.Properties{
		propKind: int32(w.kind), images.PropCameraID: camera, images.PropCapturedAt: captured.UTC(), images.PropBlobURI: blob,
		propJob: w.job, propDeletedAt: w.at}})
	if err != nil {
		return err
	}
	w.next++
	w.wrote = true
	return nil
}

// finish stages the next sequence number, if the section wrote any row.
func (w *outboxWriter) finish() error {
	if !w.wrote {
		return nil
	}
	_, err := w.b.Put(w.table.Name(), store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxNextRow,
		Properties: store.Properties{propSeq: int64(w.next)}})
	return err
}

// KeepsOutbox reports whether the engine keeps the outbox of deleted
// images (Options.Outbox).
func (e *Engine) KeepsOutbox() bool { return e.outbox != nil }

// DeletedImages returns up to limit images of the outbox after the
// position after, a Token of an earlier image ("": from the first kept),
// oldest first; ErrOutboxTrimmed if rows after it were retired,
// ErrBadResumeToken if no image of this outbox has such a token, an
// *AheadError (ErrOutboxAhead) if this outbox never gave it out.
func (e *Engine) DeletedImages(ctx context.Context, after string, limit int) ([]DeletedImage, error) {
	if e.outbox == nil {
		return nil, errors.New("retention: the engine keeps no outbox of deleted images")
	}
	if err := e.CheckResumeToken(after); err != nil {
		return nil, err
	}
	return e.driver.deletedImages(ctx, after, limit)
}

// deletedImages reads the outbox after a position: the records are in
// the order of their sequence, given in the sections' batches.
func (d *embeddedDriver) deletedImages(ctx context.Context, after string, limit int) ([]DeletedImage, error) {
	e := d.e
	var pos uint64
	if after != "" {
		pos, _ = strconv.ParseUint(after, 10, 64)
	}
	if pos > 0 {
		if err := e.checkPosition(ctx, pos); err != nil {
			return nil, err
		}
	}
	page, err := e.outbox.Query(ctx, store.Query{PartitionKey: outboxPart,
		Rows: store.Range{From: outboxKey(pos + 1)}, Limit: min(max(limit, 1), store.MaxPageSize)})
	if err != nil {
		return nil, err
	}
	out := make([]DeletedImage, 0, len(page.Entities))
	for _, r := range page.Entities {
		seq, err := strconv.ParseUint(r.RowKey, 16, 64)
		if err != nil {
			continue
		}
		d := deletedImage(r)
		d.Seq, d.Token = seq, strconv.FormatUint(seq, 10)
		d.JobID, _ = r.Properties[propJob].(string)
		out = append(out, d)
	}
	return out, nil
}

// checkPosition reports whether the embedded outbox can be read after pos:
// ErrOutboxTrimmed if rows after it were retired, an *AheadError if the
// outbox never gave it out (past its next sequence, or in the positions a
// restore left behind).
func (e *Engine) checkPosition(ctx context.Context, pos uint64) error {
	meta, err := e.outbox.Query(ctx, store.Query{PartitionKey: outboxMetaPart})
	if err != nil {
		return err
	}
	next := uint64(1)
	for _, r := range meta.Entities {
		switch n := seqOf(r, propSeq); {
		case r.RowKey == outboxNextRow:
			next = max(n, 1)
		case r.RowKey == outboxTrimRow && pos+1 < n:
			return fmt.Errorf("%w: position %d, retired through %d", ErrOutboxTrimmed, pos, n-1)
		case strings.HasPrefix(r.RowKey, outboxRestoredRow):
			from, err := strconv.ParseUint(strings.TrimPrefix(r.RowKey, outboxRestoredRow), 16, 64)
			if err == nil && pos >= from && pos < n {
				return &AheadError{Token: strconv.FormatUint(pos, 10), End: strconv.FormatUint(from-1, 10)}
			}
		}
	}
	if pos >= next {
		return &AheadError{Token: strconv.FormatUint(pos, 10), End: strconv.FormatUint(next-1, 10)}
	}
	return nil
}

// outboxRestoredRow + outboxKey(the backup's next sequence), in
// outboxMetaPart, records a restore: its propSeq is the next sequence the
// restore set.
const outboxRestoredRow = "restored-"

// outboxRestoreGap is how far a restore moves the embedded outbox's next
// sequence: past every position the lost history can have given out, as
// long as it recorded fewer deletions than this after the backup.
const outboxRestoreGap = 1 << 32

// MarkOutboxRestored records, in a store just restored from a backup (by
// metadatad restore), that the positions the outbox gave out after the
// backup was taken are gone: they are refused from now on, and the
// outbox's new records take positions past them. Without it a reader
// holding one would, once new records reached it, read on from there and
// skip the new records before it. The queue design's store (Azure) is
// restored by no command of this service and has no mark.
func (e *Engine) MarkOutboxRestored(ctx context.Context) error {
	if e.outbox == nil {
		return nil
	}
	return e.driver.markOutboxRestored(ctx)
}

func (d *embeddedDriver) markOutboxRestored(ctx context.Context) error {
	e := d.e
	next := uint64(1)
	switch r, err := e.outbox.Get(ctx, outboxMetaPart, outboxNextRow); {
	case err == nil:
		next = max(seqOf(r, propSeq), 1)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	moved := next + outboxRestoreGap
	return e.outbox.Batch(ctx, []store.Op{
		{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxRestoredRow + outboxKey(next),
			Properties: store.Properties{propSeq: int64(moved)}}},
		{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxNextRow,
			Properties: store.Properties{propSeq: int64(moved)}}},
	})
}

// CheckResumeToken reports whether a token could be one of this engine's
// outbox: a decimal position on the embedded store, a seal and a row key
// in the queue design; ErrBadResumeToken if not.
func (e *Engine) CheckResumeToken(tok string) error {
	if tok == "" {
		return nil
	}
	return e.driver.checkResumeToken(tok)
}

func (d *embeddedDriver) checkResumeToken(tok string) error {
	if _, err := strconv.ParseUint(tok, 10, 64); err != nil {
		return fmt.Errorf("%w: %q", ErrBadResumeToken, tok)
	}
	return nil
}

// jobKeepsOutbox is false: the sections write the outbox in their
// batches, with no outbox of each job's to seal.
func (d *embeddedDriver) jobKeepsOutbox(bool) bool { return false }

func (d *embeddedDriver) sealJobOutbox(context.Context, string) error { return nil }

// deletedImage reads an outbox row of either design.
func deletedImage(r store.Entity) DeletedImage {
	var d DeletedImage
	kind, _ := r.Properties[propKind].(int32)
	d.Kind = images.Kind(kind)
	d.CameraID, _ = r.Properties[images.PropCameraID].(string)
	d.CapturedAt, _ = r.Properties[images.PropCapturedAt].(time.Time)
	d.BlobURI, _ = r.Properties[images.PropBlobURI].(string)
	d.DeletedAt, _ = r.Properties[propDeletedAt].(time.Time)
	return d
}

// retireOutbox deletes the outbox rows deleted before cutoff, oldest
// first, and records the last position retired, so that a reader behind
// it learns its rows are gone rather than skipping them unawares.
func (e *Engine) retireOutbox(ctx context.Context, cutoff time.Time) (int, error) {
	if e.outbox == nil {
		return 0, nil
	}
	return e.driver.retireOutbox(ctx, cutoff)
}

func (d *embeddedDriver) retireOutbox(ctx context.Context, cutoff time.Time) (int, error) {
	e := d.e
	n := 0
	for {
		page, err := e.outbox.Query(ctx, store.Query{PartitionKey: outboxPart, Limit: store.MaxBatchOps})
		if err != nil {
			return n, err
		}
		var ops []store.Op
		var last uint64
		for _, r := range page.Entities {
			if at, _ := r.Properties[propDeletedAt].(time.Time); !at.Before(cutoff) {
				break
			}
			ops = append(ops, store.Op{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: outboxPart, RowKey: r.RowKey}})
			last, _ = strconv.ParseUint(r.RowKey, 16, 64)
		}
		if len(ops) == 0 {
			return n, nil
		}
		// The retired position first: a reader never finds a gap unnamed.
		if _, err := e.outbox.Upsert(ctx, store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxTrimRow,
			Properties: store.Properties{propSeq: int64(last + 1)}}, store.Replace); err != nil {
			return n, err
		}
		if err := deleteOps(ctx, e.outbox, ops, nil); err != nil {
			return n, err
		}
		n += len(ops)
		if len(ops) < len(page.Entities) || page.Next == nil {
			return n, nil
		}
	}
}
