package retention

import (
	"context"
	"errors"
	"fmt"
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

// ErrBadResumeToken reports a resume token no outbox of this kind made.
var ErrBadResumeToken = errors.New("retention: not a resume token of the deleted images")

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

// Properties of an outbox record (DeletedImageProperties) and of the
// sequence rows both designs keep (SeqKey, SeqOf).
const (
	propSeq       = "Seq"
	propKind      = "Kind"
	propJob       = "JobId"
	propDeletedAt = "DeletedAt"
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

// SeqKey is the row key of an outbox position: fixed-width hex, so that
// rows sort by position.
func SeqKey(seq uint64) string { return fmt.Sprintf("%016x", seq) }

// SeqOf is the position a sequence row holds, 0 if none.
func SeqOf(e store.Entity) uint64 {
	n, _ := e.Properties[propSeq].(int64)
	return uint64(n)
}

// SeqProperties are the properties of a sequence row holding seq.
func SeqProperties(seq uint64) store.Properties { return store.Properties{propSeq: int64(seq)} }

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
	return e.driver.DeletedImages(ctx, after, limit)
}

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
	return e.driver.MarkOutboxRestored(ctx)
}

// CheckResumeToken reports whether a token could be one of this engine's
// outbox: a decimal position on the embedded store, a seal and a row key
// in the queue design; ErrBadResumeToken if not.
func (e *Engine) CheckResumeToken(tok string) error {
	if tok == "" {
		return nil
	}
	return e.driver.CheckResumeToken(tok)
}

// DeletedImageProperties are the properties an outbox row of either
// design records of a deleted image: one record format for the readers.
func DeletedImageProperties(d DeletedImage) store.Properties {
	return store.Properties{propKind: int32(d.Kind), images.PropCameraID: d.CameraID, images.PropCapturedAt: d.CapturedAt.UTC(),
		images.PropBlobURI: d.BlobURI, propJob: d.JobID, propDeletedAt: d.DeletedAt}
}

// DeletedImageFrom reads what DeletedImageProperties wrote; Seq, Token and
// JobID are the reader's.
func DeletedImageFrom(r store.Entity) DeletedImage {
	var d DeletedImage
	kind, _ := r.Properties[propKind].(int32)
	d.Kind = images.Kind(kind)
	d.CameraID, _ = r.Properties[images.PropCameraID].(string)
	d.CapturedAt, _ = r.Properties[images.PropCapturedAt].(time.Time)
	d.BlobURI, _ = r.Properties[images.PropBlobURI].(string)
	d.DeletedAt, _ = r.Properties[propDeletedAt].(time.Time)
	d.JobID, _ = r.Properties[propJob].(string)
	return d
}

// RetireOutbox deletes the outbox rows deleted before cutoff, oldest
// first, and records the last position retired, so that a reader behind
// it learns its rows are gone rather than skipping them unawares.
func (e *Engine) retireOutbox(ctx context.Context, cutoff time.Time) (int, error) {
	if e.outbox == nil {
		return 0, nil
	}
	return e.driver.RetireOutbox(ctx, cutoff)
}
