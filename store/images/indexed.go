package images

import (
	"context"
	"fmt"
	"iter"

	"github.com/metadatad/metadatad/store"
)

// IndexedCamera is the camera of the primary row an index row points at.
func IndexedCamera(index store.Entity) string {
	id, _ := index.Properties[PropDeviceID].(string)
	return id
}

// IndexedRowKey is the key of the primary row an index row points at:
// inverted capture ticks, so newer sorts first.
func IndexedRowKey(index store.Entity) string {
	key, _ := index.Properties[PropMetadataRowKey].(string)
	return key
}

// IndexedImage reads the image an index row points at. It fails with
// store.ErrNotFound while that primary row is not there: a create on a
// backend without transactions writes it after the index row (see IndexLag),
// and one that gave up never writes it.
func (r *Repository) IndexedImage(ctx context.Context, index store.Entity) (Image, error) {
	camera, rowKey := IndexedCamera(index), IndexedRowKey(index)
	if camera == "" || rowKey == "" {
		return Image{}, fmt.Errorf("images: index row %s/%s names no primary row: %w", index.PartitionKey, index.RowKey, store.ErrCorrupt)
	}
	img, err := r.Image(ctx, camera, rowKey)
	if err != nil {
		return Image{}, fmt.Errorf("images: primary row of index row %s/%s: %w", index.PartitionKey, index.RowKey, err)
	}
	return img, nil
}

// Image reads the camera's image of the given row key; store.ErrNotFound
// if there is none.
func (r *Repository) Image(ctx context.Context, cameraID, rowKey string) (Image, error) {
	e, err := r.primary.Get(ctx, cameraID, rowKey)
	if err != nil {
		return Image{}, err
	}
	return imageFromEntity(e)
}

// indexEntity is img's index row as this repository writes it. Where one
// transaction writes the index row with its primary row (the embedded
// store), the index row carries the image too: the fleet at a moment then
// reads a minute's images in one pass over the minute's index partition,
// where their primary rows lie one per camera partition, a seek and a
// block each. Its bytes are the image's a second time, and only there is
// the copy sure to be the image's: a create that writes the index row
// first (Azure) may give up before its primary row, and a retry of
// different content then finds the key taken (resolveDuplicate).
func (r *Repository) indexEntity(img Image, primary store.Entity) store.Entity {
	if r.transactor == nil {
		return indexEntity(img, r.shards, nil)
	}
	return indexEntity(img, r.shards, primary.Properties)
}

// WalkIndex reads a page of up to limit index rows of partitions, from
// resume (nil: the start), handing row each one with the primary row it
// names and, where it carries it, its image and true; it returns the
// cursor of the next page (nil once none remains). A row carries its image
// only where one transaction wrote it with its primary row (see
// indexEntity): on Azure, for the .NET fleet's rows and for rows written
// before index rows carried images, row gets false and Image reads the
// image. The rows reach row without their ETag and Timestamp.
func (r *Repository) WalkIndex(ctx context.Context, partitions store.Range, resume *store.Cursor, limit int,
	row func(index IndexRow, img Image, carried bool) error) (*store.Cursor, error) {
	var w indexWalk // one for every row: a row's state in a closure would move to the heap row by row
	visit := w.visit
	return store.Walk(ctx, r.index, store.Scan{Partitions: partitions, Resume: resume, Limit: limit},
		func(pk, rk string, props iter.Seq2[string, store.Value]) error {
			w = indexWalk{index: IndexRow{Key: store.Key{PartitionKey: pk, RowKey: rk}}}
			props(visit)
			index := w.index
			if index.CameraID == "" || index.RowKey == "" {
				index.CameraID, index.RowKey, _ = parseIndexKey(pk, rk)
			}
			if !w.carries || r.transactor == nil || index.CameraID == "" || index.RowKey == "" {
				return row(index, Image{}, false)
			}
			img, err := w.image.image(index.CameraID, index.RowKey)
			if err != nil {
				return fmt.Errorf("images: image of index row %s/%s: %w", pk, rk, err)
			}
			return row(index, img, true)
		})
}

// indexWalk gathers an index row's properties as WalkIndex meets them.
type indexWalk struct {
	index   IndexRow
	image   imageFields
	carries bool
}

func (w *indexWalk) visit(name string, v store.Value) bool {
	switch {
	case name == PropDeviceID && v.Kind == store.KindString:
		w.index.CameraID = v.Str
	case name == PropMetadataRowKey && v.Kind == store.KindString:
		w.index.RowKey = v.Str
	default:
		w.carries = w.carries || name == PropBlobURI
		w.image.set(name, v)
	}
	return true
}

// IndexRowOf is an index row read with its properties, as IndexScan gives
// it: its primary row named by DeviceId and MetadataRowKey, or by its keys
// when it lacks them (see parseIndexKey).
func IndexRowOf(index store.Entity) IndexRow {
	row := IndexRow{Key: store.Key{PartitionKey: index.PartitionKey, RowKey: index.RowKey},
		CameraID: IndexedCamera(index), RowKey: IndexedRowKey(index), ETag: index.ETag, Timestamp: index.Timestamp}
	if row.CameraID == "" || row.RowKey == "" {
		row.CameraID, row.RowKey, _ = parseIndexKey(index.PartitionKey, index.RowKey)
	}
	return row
}
