package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// One image deleted on purpose (retention.ImageDeleter), without a
// transaction: the primary row goes first, then its index rows, so no
// primary row is ever left without its index row (an index row without
// one is harmless and the janitor's). With an outbox, a pending record,
// keyed by the image, is written before the primary row's delete; after
// it, the image's outbox row is written ready in a partition of the
// delete's own, which is sealed as a job's is (outboxseal.go), and the
// record goes. A retry that finds the primary row gone finishes the
// record it left; records no retry finishes are settled by Retire, as a
// job's pending rows are at its end (fence).

// Rows of one image's delete in DefaultOutboxTable: the pending records
// in pendingPart; each delete's outbox row in a partition deletePrefix +
// 12 hex digits (a job's are 16 hex digits).
const (
	pendingPart  = "pending"
	deletePrefix = "del-"
	propPart     = "Part"
)

// pendingSettleAge is how old a pending record is before Retire settles
// it: far longer than a delete takes, so that it settles only the records
// of deletes that stopped.
const pendingSettleAge = 10 * time.Minute

// pendingDelete is one image delete's pending record.
type pendingDelete struct {
	kind        images.Kind
	camera, row string
	// part is the delete's own outbox partition; etag the record's.
	part, etag string
	props      store.Properties
}

// DeleteImage deletes one image: see the comment at the top of the file.
// A primary row whose ETag changed between its read and its delete (a
// fence) is read again.
func (e *driver) DeleteImage(ctx context.Context, kind images.Kind, camera, row string) error {
	for range maxDeleteAttempts {
		err := e.deleteImage(ctx, kind, camera, row)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return fmt.Errorf("retention/queue: image %s/%s changed %d times in a row", camera, row, maxDeleteAttempts)
}

// maxDeleteAttempts bounds the attempts of one image's delete.
const maxDeleteAttempts = 10

func (e *driver) deleteImage(ctx context.Context, kind images.Kind, camera, row string) error {
	primary, _ := e.repos[kind].Tables()
	stored, err := primary.Get(ctx, camera, row)
	if errors.Is(err, store.ErrNotFound) {
		// A retry of a delete cut short after its primary row went.
		p, perr := e.readPending(ctx, kind, camera, row)
		if perr != nil {
			return errors.Join(err, ignoreNotFound(perr))
		}
		return e.finishDelete(ctx, p)
	}
	if err != nil {
		return err
	}
	p, err := e.recordPending(ctx, kind, camera, stored)
	if err != nil {
		return err
	}
	if err := primary.Delete(ctx, camera, row, stored.ETag); err != nil {
		// Changed or deleted meanwhile: this attempt deleted nothing.
		return errors.Join(fmt.Errorf("image %s/%s: %w", camera, row, err), e.dropPending(ctx, p))
	}
	return e.finishDelete(ctx, p)
}

// recordPending writes the pending record of the image stored, before its
// delete; none without an outbox.
func (e *driver) recordPending(ctx context.Context, kind images.Kind, camera string, stored store.Entity) (*pendingDelete, error) {
	p := &pendingDelete{kind: kind, camera: camera, row: stored.RowKey}
	if e.outbox == nil {
		return p, nil
	}
	captured, err := store.TimeFromInvertedTicksRowKey(stored.RowKey)
	if err != nil {
		return nil, err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	p.part = deletePrefix + hex.EncodeToString(id[:])
	blob, _ := stored.Properties[images.PropBlobURI].(string)
	p.props = retention.DeletedImageProperties(retention.DeletedImage{Kind: kind, CameraID: camera, CapturedAt: captured,
		BlobURI: blob, DeletedAt: e.opts.Now().UTC()})
	p.props[propRow], p.props[propPart] = stored.RowKey, p.part
	w, err := e.outbox.Upsert(ctx, store.Entity{PartitionKey: pendingPart, RowKey: outboxRowKey(kind, camera, stored.RowKey),
		Properties: p.props}, store.Replace)
	p.etag = w.ETag
	return p, err
}

// readPending reads the pending record of an image; store.ErrNotFound if
// there is none (or no outbox).
func (e *driver) readPending(ctx context.Context, kind images.Kind, camera, row string) (*pendingDelete, error) {
	if e.outbox == nil {
		return nil, store.ErrNotFound
	}
	r, err := e.outbox.Get(ctx, pendingPart, outboxRowKey(kind, camera, row))
	if err != nil {
		return nil, err
	}
	return pendingFrom(r), nil
}

func pendingFrom(r store.Entity) *pendingDelete {
	d := retention.DeletedImageFrom(r)
	p := &pendingDelete{kind: d.Kind, camera: d.CameraID, etag: r.ETag, props: r.Properties}
	p.row, _ = r.Properties[propRow].(string)
	p.part, _ = r.Properties[propPart].(string)
	return p
}

// finishDelete deletes the index rows of an image whose primary row is
// gone and, with its pending record, names it in its outbox partition,
// seals that and drops the record. Each step is idempotent.
func (e *driver) finishDelete(ctx context.Context, p *pendingDelete) error {
	_, index := e.repos[p.kind].Tables()
	for _, k := range e.repos[p.kind].IndexKeys(p.camera, p.row) {
		if err := index.Delete(ctx, k.PartitionKey, k.RowKey, ""); ignoreNotFound(err) != nil {
			return err
		}
	}
	if p.part == "" {
		return nil
	}
	props := store.Properties{}
	for k, v := range p.props {
		props[k] = v
	}
	delete(props, propPart)
	props[propReady] = true
	if _, err := e.outbox.Upsert(ctx, store.Entity{PartitionKey: p.part, RowKey: outboxRowKey(p.kind, p.camera, p.row),
		Properties: props}, store.Replace); err != nil {
		return err
	}
	if err := e.seal(ctx, p.part); err != nil {
		return err
	}
	return e.dropPending(ctx, p)
}

// dropPending deletes p's pending record at the ETag it was written with:
// a later attempt's record stays.
func (e *driver) dropPending(ctx context.Context, p *pendingDelete) error {
	if p.part == "" {
		return nil
	}
	err := e.outbox.Delete(ctx, pendingPart, outboxRowKey(p.kind, p.camera, p.row), p.etag)
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return ignoreNotFound(err)
}

// settlePending settles the pending records older than pendingSettleAge,
// of deletes that stopped and no retry finished: one whose primary row is
// gone is finished, one whose row is there is dropped, the row fenced
// first (fence), so a delete that stalled deletes it no more.
func (e *driver) settlePending(ctx context.Context) error {
	if e.outbox == nil {
		return nil
	}
	before := e.opts.Now().Add(-pendingSettleAge)
	q := store.Query{PartitionKey: pendingPart}
	for {
		page, err := e.outbox.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, r := range page.Entities {
			if r.Timestamp.After(before) {
				continue
			}
			p := pendingFrom(r)
			repo, ok := e.repos[p.kind]
			if !ok {
				continue
			}
			primary, _ := repo.Tables()
			gone, err := fence(ctx, primary, p.camera, p.row)
			if err == nil && gone {
				err = e.finishDelete(ctx, p)
			} else if err == nil {
				err = e.dropPending(ctx, p)
			}
			if err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		q.Resume = page.Next
	}
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
