package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/metadatad/metadatad/store"
)

// Pointer rows keep the filtered reads (a pano camera's latest clear-day
// image, a pre-stitch camera's images of one correlation id) from scanning
// the camera's whole history. Each kind that has such a read has a third
// table, PointerTable(primary), partitioned by camera like the primary table:
//
//   - a pointer row per (camera, match) holds the newest and oldest primary
//     row keys of the images that match (for pano, the clear-day images;
//     for pre-stitch, one row per correlation id), so the read queries the
//     primary partition between them only;
//   - a "covered" row per camera says that the camera's pointer rows cover
//     every image in its partition, so an absent pointer row means "no
//     match" rather than "not known".
//
// A pointer row only ever widens (the union of what it covered and the new
// row key), with a conditional write, so creates of one camera, retries of
// one image and the backfill commute and none undoes another. A create
// writes its pointer after its primary row (in the same transaction where
// the backend has one) and before it is acknowledged; a retried create of
// an image already stored widens the pointer again, so a crash between the
// writes never hides an acknowledged image.
//
// The purge does not retire pointers. The read verifies instead: it reads
// the primary rows in the pointer's range, so an image purged since is
// simply not there and the read goes on to the next older match. Since the
// purge removes a camera's oldest rows first, what remains of the range
// after its newest match was purged is only what the purge left behind (an
// old image uploaded late, which widened the range when it was created), so
// the fall-back stays as small as the read it replaces was large.
//
// Pointer rows are small: one per camera for the clear days, one per camera
// and correlation id, one covered row per camera. Those of correlation ids
// whose images were all purged stay, and read as "none".
//
// A camera without its covered row is backfilled by its first filtered read:
// one scan of its partition, as every such read cost before, then the
// covered row. Creates do not write it: they cannot tell, without that same
// scan, whether the camera has images from before the pointers (an earlier
// version, or a copy without the pointer table). The covered row is only
// written after the pointers it vouches for, so a crash in a backfill
// leaves the camera to be backfilled again, widening idempotently.

// PointerTable is the name of the pointer table of a primary table.
func PointerTable(primary string) string { return primary + "Pointers" }

// Pointer row keys and properties.
const (
	clearDayPointer = "latest-clear-day"
	coveredRow      = "covered"
	// correlationPrefix starts the row key of a correlation id's pointer:
	// the id's hash, since an id may hold characters keys may not.
	correlationPrefix = "c_"
	// PropNewestRowKey and PropOldestRowKey bound the primary row keys a
	// pointer row covers.
	PropNewestRowKey = "NewestRowKey"
	PropOldestRowKey = "OldestRowKey"
)

// maxPointerAttempts bounds the conditional writes of one widening; each
// failed attempt means another writer widened the same row meanwhile.
const maxPointerAttempts = 100

// pointerKey is the pointer row that an image of the repository's kind
// feeds, if any.
func (r *Repository) pointerKey(img Image) (string, bool) {
	switch {
	case r.pointers == nil:
		return "", false
	case r.kind == Pano && img.IsClearDay:
		return clearDayPointer, true
	case r.kind == PreStitch && img.PanoImageCorrelationID != "":
		return correlationRowKey(img.PanoImageCorrelationID), true
	}
	return "", false
}

func correlationRowKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return correlationPrefix + hex.EncodeToString(sum[:16])
}

// filterPointer is the pointer row that bounds a read with filter, if the
// repository keeps one.
func (r *Repository) filterPointer(f Filter) (string, bool) {
	switch {
	case r.pointers == nil:
		return "", false
	case r.kind == Pano && f.ClearDayOnly && f.CorrelationID == "":
		return clearDayPointer, true
	case r.kind == PreStitch && f.CorrelationID != "" && !f.ClearDayOnly:
		return correlationRowKey(f.CorrelationID), true
	}
	return "", false
}

// pointerWrite is the write that widens pointer row key of camera to cover
// the row keys from newest to oldest, or nil when it covers them already.
func (r *Repository) pointerWrite(ctx context.Context, camera, key, newest, oldest string) (*store.Op, error) {
	stored, err := r.pointers.Get(ctx, camera, key)
	if errors.Is(err, store.ErrNotFound) {
		e := store.Entity{PartitionKey: camera, RowKey: key,
			Properties: store.Properties{PropNewestRowKey: newest, PropOldestRowKey: oldest}}
		return &store.Op{Kind: store.OpInsert, Entity: e}, nil
	}
	if err != nil {
		return nil, err
	}
	had, hadOldest := pointerBounds(stored)
	if had != "" && newest >= had && oldest <= hadOldest {
		return nil, nil
	}
	if had != "" {
		newest, oldest = min(newest, had), max(oldest, hadOldest)
	}
	e := store.Entity{PartitionKey: camera, RowKey: key,
		Properties: store.Properties{PropNewestRowKey: newest, PropOldestRowKey: oldest}}
	return &store.Op{Kind: store.OpUpdate, Mode: store.Replace, Entity: e, IfMatch: stored.ETag}, nil
}

func pointerBounds(e store.Entity) (newest, oldest string) {
	newest, _ = e.Properties[PropNewestRowKey].(string)
	oldest, _ = e.Properties[PropOldestRowKey].(string)
	return newest, oldest
}

// lostRace tells whether a pointer write failed because another writer
// changed the row between its read and its write.
func lostRace(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrNotFound)
}

// widen makes pointer row key of camera cover the row keys from newest to
// oldest.
func (r *Repository) widen(ctx context.Context, camera, key, newest, oldest string) error {
	for range maxPointerAttempts {
		op, err := r.pointerWrite(ctx, camera, key, newest, oldest)
		if err != nil || op == nil {
			return err
		}
		if op.Kind == store.OpInsert {
			_, err = r.pointers.Insert(ctx, op.Entity)
		} else {
			_, err = r.pointers.Update(ctx, op.Entity, op.Mode, op.IfMatch)
		}
		if !lostRace(err) {
			return err
		}
	}
	return fmt.Errorf("images: pointer %s of camera %s changed %d times in a row", key, camera, maxPointerAttempts)
}

// widenFor keeps img's pointer row, if it feeds one, covering it.
func (r *Repository) widenFor(ctx context.Context, img Image) error {
	key, ok := r.pointerKey(img)
	if !ok {
		return nil
	}
	return r.widen(ctx, img.CameraID, key, img.RowKey, img.RowKey)
}

// pointerRows is the primary row-key range that holds every image of
// camera matching pointer key; found is false when there is none.
func (r *Repository) pointerRows(ctx context.Context, camera, key string) (rows store.Range, found bool, err error) {
	if err := r.ensureCovered(ctx, camera); err != nil {
		return store.Range{}, false, err
	}
	stored, err := r.pointers.Get(ctx, camera, key)
	if errors.Is(err, store.ErrNotFound) {
		return store.Range{}, false, nil
	}
	if err != nil {
		return store.Range{}, false, err
	}
	newest, oldest := pointerBounds(stored)
	if newest == "" {
		return store.Range{}, false, nil
	}
	// Primary row keys are 19 digits: none lies between oldest and
	// oldest+"0", so this bound keeps oldest and nothing beyond it.
	rows.From, rows.To = newest, oldest+"0"
	return rows, true, nil
}

// ensureCovered backfills camera's pointer rows once, unless the camera is
// covered already.
func (r *Repository) ensureCovered(ctx context.Context, camera string) error {
	if _, err := r.pointers.Get(ctx, camera, coveredRow); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	bounds := map[string][2]string{}
	q := store.Query{PartitionKey: camera}
	for {
		page, err := r.primary.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			img, err := imageFromEntity(e)
			if err != nil {
				return err
			}
			key, ok := r.pointerKey(img)
			if !ok {
				continue
			}
			b, seen := bounds[key]
			if !seen {
				b[0] = img.RowKey
			}
			b[1] = img.RowKey
			bounds[key] = b
		}
		if page.Next == nil {
			break
		}
		q.Resume = page.Next
	}
	for key, b := range bounds {
		if err := r.widen(ctx, camera, key, b[0], b[1]); err != nil {
			return err
		}
	}
	_, err := r.pointers.Insert(ctx, store.Entity{PartitionKey: camera, RowKey: coveredRow, Properties: store.Properties{}})
	if errors.Is(err, store.ErrAlreadyExists) {
		return nil
	}
	return err
}
