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
