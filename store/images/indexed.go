package images

import (
	"context"
	"fmt"

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

// IndexPage reads a page of up to limit index rows of partitions, from
// resume (nil: the start), with every property: for a reader of the images
// the rows carry (Carried), where IndexScan reads keys alone.
func (r *Repository) IndexPage(ctx context.Context, partitions store.Range, resume *store.Cursor, limit int) (store.Page, error) {
	return r.index.Scan(ctx, store.Scan{Partitions: partitions, Resume: resume, Limit: limit})
}

// Carried is the image an index row read by IndexPage carries, and true;
// false when the row carries only its way back to its primary row (an
// index row of Azure, of the .NET fleet, or written before index rows
// carried images), whose image Image reads. Only a repository whose
// creates write both rows in one transaction trusts the copy (see
// indexEntity): on Azure an index row may outlive its primary row.
func (r *Repository) Carried(index store.Entity) (Image, bool, error) {
	row := IndexRowOf(index)
	if _, ok := index.Properties[PropBlobURI]; !ok || r.transactor == nil || row.CameraID == "" || row.RowKey == "" {
		return Image{}, false, nil
	}
	// The capture instant is the primary row key's (store.CapturedAt).
	primary := store.Entity{PartitionKey: row.CameraID, RowKey: row.RowKey, Properties: index.Properties}
	img, err := imageFromEntity(primary)
	if err != nil {
		return Image{}, false, fmt.Errorf("images: image of index row %s/%s: %w", index.PartitionKey, index.RowKey, err)
	}
	return img, true, nil
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
