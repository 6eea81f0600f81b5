package images

import (
	"fmt"
	"hash/fnv"
	"maps"
	"time"

	"github.com/metadatad/metadatad/store"
)

// Image is the metadata of one captured image.
type Image struct {
	CameraID    string
	CapturedAt  time.Time
	BlobURI     string
	ContentType string
	SizeBytes   int64
	Width       int32
	Height      int32
	Attributes  map[string]string
	// IsClearDay is kept for Pano images only.
	IsClearDay bool
	// PanoImageCorrelationID is kept for PreStitch images only.
	PanoImageCorrelationID string
	// RowKey is the primary row key; set by the repository.
	RowKey string
}

// Property names of the stored entities: PascalCase, as the .NET system reads them.
const (
	PropCameraID      = "CameraId"
	PropCapturedAt    = "CapturedAt"
	PropBlobURI       = "BlobUri"
	PropContentType   = "ContentType"
	PropSizeBytes     = "SizeBytes"
	PropWidth         = "Width"
	PropHeight        = "Height"
	PropAttributes    = "Attributes"
	PropIsClearDay    = "IsClearDay"
	PropCorrelationID = "PanoImageCorrelationId"
	// PropDeviceID and PropMetadataRowKey are the index row's way back to its primary row.
	PropDeviceID       = "DeviceId"
	PropMetadataRowKey = "MetadataRowKey"
)

// primaryEntity is the primary row of img, keyed by camera and inverted ticks.
func (k Kind) primaryEntity(img Image) store.Entity {
	props := store.Properties{
		PropCameraID:    img.CameraID,
		PropCapturedAt:  img.CapturedAt,
		PropBlobURI:     img.BlobURI,
		PropContentType: img.ContentType,
		PropSizeBytes:   img.SizeBytes,
		PropWidth:       img.Width,
		PropHeight:      img.Height,
	}
	store.SetStringMap(props, PropAttributes, img.Attributes)
	switch k {
	case Pano:
		props[PropIsClearDay] = img.IsClearDay
	case PreStitch:
		props[PropCorrelationID] = img.PanoImageCorrelationID
	}
	return store.Entity{PartitionKey: img.CameraID, RowKey: img.RowKey, Properties: props}
}

// indexEntity is the index row of img: partitioned by capture minute (and
// shard, with shards above 1), keyed by primary row key and camera so two
// cameras capturing in the same instant never collide. With carry it holds
// the primary row's properties as well (see Repository.indexEntity), but
// the camera and the capture instant, which DeviceId and MetadataRowKey
// already tell: a single image's row then has eight properties, which a
// reader decodes into a map of one group instead of a table of several.
func indexEntity(img Image, shards int, carry store.Properties) store.Entity {
	e := store.Entity{
		PartitionKey: IndexPartitionKey(img.CapturedAt, img.CameraID, shards),
		RowKey:       IndexRowKey(img.RowKey, img.CameraID),
		Properties: store.Properties{
			PropDeviceID:       img.CameraID,
			PropMetadataRowKey: img.RowKey,
		},
	}
	if carry == nil {
		return e
	}
	props := maps.Clone(carry)
	delete(props, PropCameraID)
	delete(props, PropCapturedAt)
	maps.Copy(props, e.Properties)
	e.Properties = props
	return e
}

// IndexPartitionKey is the index partition of an image: its capture minute,
// yyyyMMddHHmm, followed by _<shard> when the index has several shards.
func IndexPartitionKey(capturedAt time.Time, cameraID string, shards int) string {
	minute := store.MinutePartitionKey(capturedAt)
	if shards <= 1 {
		return minute
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(cameraID))
	return fmt.Sprintf("%s_%d", minute, h.Sum32()%uint32(shards))
}

// IndexRowKey is the index row key of a primary row.
func IndexRowKey(primaryRowKey, cameraID string) string { return primaryRowKey + "_" + cameraID }

// imageFromEntity reads a primary row back.
func imageFromEntity(e store.Entity) (Image, error) {
	var f imageFields
	for name, v := range e.Properties {
		f.set(name, store.ValueOf(v))
	}
	return f.image(e.PartitionKey, e.RowKey)
}

// imageFields gathers an image's properties as a row's reader meets them,
// in any order: the one rule of what each property is, for a primary row
// read into a map and an index row walked (Repository.WalkIndex). A value
// of another type than its property's is left unread, as it always was.
type imageFields struct {
	img        Image
	attributes string
}

func (f *imageFields) set(name string, v store.Value) {
	switch {
	case name == PropCapturedAt && v.Kind == store.KindDateTime:
		f.img.CapturedAt = v.Time
	case name == PropBlobURI && v.Kind == store.KindString:
		f.img.BlobURI = v.Str
	case name == PropContentType && v.Kind == store.KindString:
		f.img.ContentType = v.Str
	case name == PropSizeBytes && v.Kind == store.KindInt64:
		f.img.SizeBytes = v.Int
	case name == PropWidth && v.Kind == store.KindInt32:
		f.img.Width = int32(v.Int)
	case name == PropHeight && v.Kind == store.KindInt32:
		f.img.Height = int32(v.Int)
	case name == PropIsClearDay && v.Kind == store.KindBool:
		f.img.IsClearDay = v.Int != 0
	case name == PropCorrelationID && v.Kind == store.KindString:
		f.img.PanoImageCorrelationID = v.Str
	case name == PropAttributes && v.Kind == store.KindString:
		f.attributes = v.Str
	}
}

// image is the image of the row at cameraID/rowKey: its capture instant the
// CapturedAt property's, or for rows written without one (as older .NET
// writers did, and index rows that carry their image) the row key's.
func (f *imageFields) image(cameraID, rowKey string) (Image, error) {
	img := f.img
	img.CameraID, img.RowKey = cameraID, rowKey
	if img.CapturedAt.IsZero() {
		at, err := store.TimeFromInvertedTicksRowKey(rowKey)
		if err != nil {
			return Image{}, fmt.Errorf("store: row %s/%s: %w", cameraID, rowKey, err)
		}
		img.CapturedAt = at
	}
	var err error
	if img.Attributes, err = store.ParseStringMap(f.attributes); err != nil {
		return Image{}, fmt.Errorf("row %s/%s %s: %w", cameraID, rowKey, PropAttributes, err)
	}
	return img, nil
}
