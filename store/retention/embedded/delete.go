package embedded

import (
	"context"
	"errors"
	"fmt"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// maxDeleteAttempts bounds the transactions of one image's delete; each
// failed attempt means another write changed a row it read (the outbox's
// next sequence, most likely) between its read and its commit.
const maxDeleteAttempts = 100

// DeleteImage deletes one image in one transaction: its primary row (whose
// tally the store updates in the same batch), its index row in whichever
// form it was written, and, with an outbox, its outbox row and the
// outbox's next sequence. It is all or nothing, so a crash leaves the
// image whole or gone and named once.
func (d *driver) DeleteImage(ctx context.Context, kind images.Kind, camera, row string) error {
	tx, ok := d.env.Options().Backend.(store.Transactor)
	if !ok {
		return errors.New("retention/embedded: the backend has no transactions")
	}
	for range maxDeleteAttempts {
		ops, next, err := d.deleteOps(ctx, kind, camera, row)
		if err != nil {
			return err
		}
		d.durable.begin()
		err = tx.Transact(ctx, ops)
		if err != nil {
			next = 0
		}
		d.durable.done(next)
		var be *store.BatchError
		if !errors.As(err, &be) {
			return err
		}
		if be.Index == 0 && errors.Is(be.Err, store.ErrNotFound) {
			return fmt.Errorf("image %s/%s: %w", camera, row, be.Err) // deleted meanwhile
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return fmt.Errorf("retention/embedded: the rows of image %s/%s changed %d times in a row", camera, row, maxDeleteAttempts)
}

// deleteOps reads the image's rows and returns the transaction that
// deletes them at the ETags read, and the outbox's next sequence after it
// (0 without an outbox record).
func (d *driver) deleteOps(ctx context.Context, kind images.Kind, camera, row string) ([]store.TableOp, uint64, error) {
	repo := d.env.Repository(kind)
	primary, index := repo.Tables()
	e, err := primary.Get(ctx, camera, row)
	if err != nil {
		return nil, 0, err
	}
	ops := []store.TableOp{{Table: primary, Op: store.Op{Kind: store.OpDelete, IfMatch: e.ETag,
		Entity: store.Entity{PartitionKey: camera, RowKey: row}}}}
	for _, k := range repo.IndexKeys(camera, row) {
		ie, err := index.Get(ctx, k.PartitionKey, k.RowKey)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		ops = append(ops, store.TableOp{Table: index, Op: store.Op{Kind: store.OpDelete, IfMatch: ie.ETag,
			Entity: store.Entity{PartitionKey: k.PartitionKey, RowKey: k.RowKey}}})
	}
	if d.env.Outbox() == nil {
		return ops, 0, nil
	}
	out, next, err := d.outboxOps(ctx, kind, camera, e)
	return append(ops, out...), next, err
}

// outboxOps are the writes that name a deleted image in the outbox: its
// row at the next sequence, and the next sequence moved on at the ETag
// read, so that two deletes never take one position; and that next
// sequence (0 for none).
func (d *driver) outboxOps(ctx context.Context, kind images.Kind, camera string, e store.Entity) ([]store.TableOp, uint64, error) {
	table := d.env.Outbox()
	next := store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: outboxMetaPart, RowKey: outboxNextRow}}
	seq := uint64(1)
	switch n, err := table.Get(ctx, outboxMetaPart, outboxNextRow); {
	case err == nil:
		seq = max(retention.SeqOf(n), 1)
		next = store.Op{Kind: store.OpUpdate, Mode: store.Replace, IfMatch: n.ETag, Entity: next.Entity}
	case !errors.Is(err, store.ErrNotFound):
		return nil, 0, err
	}
	next.Entity.Properties = retention.SeqProperties(seq + 1)
	rec, ok := outboxRow(seq, kind, camera, e, "", d.env.Options().Now().UTC())
	if !ok {
		return nil, 0, nil
	}
	return []store.TableOp{{Table: table, Op: store.Op{Kind: store.OpInsert, Entity: rec}}, {Table: table, Op: next}}, seq + 1, nil
}
