package video

import (
	"time"

	"github.com/metadatad/metadatad/store"
)

// Metadata describes one recording made by one camera.
type Metadata struct {
	CameraID string
	// CapturedAt is the start of the recording.
	CapturedAt  time.Time
	Duration    time.Duration
	BlobURI     string
	ContentType string
	SizeBytes   int64
	Attributes  map[string]string
	// RowKey is the row key; set by the repository.
	RowKey string
}

// Property names of the stored entities: PascalCase, as the .NET system reads them.
const (
	PropCameraID    = "CameraId"
	PropCapturedAt  = "CapturedAt"
	PropBlobURI     = "BlobUri"
	PropContentType = "ContentType"
	PropSizeBytes   = "SizeBytes"
	PropAttributes  = "Attributes"
	// PropDurationTicks holds the duration as .NET ticks (TimeSpan.Ticks),
	// since Azure Table Storage has no duration type.
	PropDurationTicks = "DurationTicks"
)

// ticksPerDuration is how many time.Duration units make one .NET tick.
const ticksPerDuration = 100 * time.Nanosecond

func entity(m Metadata) store.Entity {
	props := store.Properties{
		PropCameraID:      m.CameraID,
		PropCapturedAt:    m.CapturedAt,
		PropDurationTicks: int64(m.Duration / ticksPerDuration),
		PropBlobURI:       m.BlobURI,
		PropContentType:   m.ContentType,
		PropSizeBytes:     m.SizeBytes,
	}
	store.SetStringMap(props, PropAttributes, m.Attributes)
	return store.Entity{PartitionKey: m.CameraID, RowKey: m.RowKey, Properties: props}
}

func fromEntity(e store.Entity) (Metadata, error) {
	m := Metadata{CameraID: e.PartitionKey, RowKey: e.RowKey}
	var err error
	if m.CapturedAt, err = store.CapturedAt(e, PropCapturedAt); err != nil {
		return Metadata{}, err
	}
	ticks, _ := e.Properties[PropDurationTicks].(int64)
	m.Duration = time.Duration(ticks) * ticksPerDuration
	m.BlobURI, _ = e.Properties[PropBlobURI].(string)
	m.ContentType, _ = e.Properties[PropContentType].(string)
	m.SizeBytes, _ = e.Properties[PropSizeBytes].(int64)
	if m.Attributes, err = store.StringMap(e, PropAttributes); err != nil {
		return Metadata{}, err
	}
	return m, nil
}
