package devices

import (
	"fmt"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
)

// StateRowKey is the row key of every device's row; the partition key
// names the device.
const StateRowKey = "state"

// State is the orchestration state of one device. Zero values are unset:
// an unset field is stored as an absent property.
type State struct {
	DeviceID         string
	CurrentConfig    string
	SingleModeStatus string
	SingleModeRate   int32
	PanoModeStatus   string
	PanoModeRate     int32
	LeasedModeStatus string
	LeasedModeRate   int32
	LeasedModeEnd    time.Time
	TurboModeStatus  string
	TurboModeRate    int32
	TurboModeEnd     time.Time
	// LastModified is when the state last changed; set by the repository.
	LastModified time.Time
	// ETag is the version of the stored row; set by the repository.
	ETag string
}

// Field names one field of State that updates set, by its property name.
type Field string

// The fields updates set, named as the .NET system's properties.
const (
	CurrentConfig    Field = "CurrentConfig"
	SingleModeStatus Field = "SingleModeStatus"
	SingleModeRate   Field = "SingleModeRate"
	PanoModeStatus   Field = "PanoModeStatus"
	PanoModeRate     Field = "PanoModeRate"
	LeasedModeStatus Field = "LeasedModeStatus"
	LeasedModeRate   Field = "LeasedModeRate"
	LeasedModeEnd    Field = "LeasedModeEndDt"
	TurboModeStatus  Field = "TurboModeStatus"
	TurboModeRate    Field = "TurboModeRate"
	TurboModeEnd     Field = "TurboModeEndDt"
)

// Fields lists every field updates set.
var Fields = []Field{
	CurrentConfig, SingleModeStatus, SingleModeRate, PanoModeStatus, PanoModeRate,
	LeasedModeStatus, LeasedModeRate, LeasedModeEnd, TurboModeStatus, TurboModeRate, TurboModeEnd,
}

// Property names the repository sets itself.
const (
	PropDeviceID     = "DeviceId"
	PropLastModified = "LastModifiedDt"
)

// properties are s's fields by property name, unset ones as zero values.
func (s State) properties() store.Properties {
	return store.Properties{
		string(CurrentConfig):    s.CurrentConfig,
		string(SingleModeStatus): s.SingleModeStatus,
		string(SingleModeRate):   s.SingleModeRate,
		string(PanoModeStatus):   s.PanoModeStatus,
		string(PanoModeRate):     s.PanoModeRate,
		string(LeasedModeStatus): s.LeasedModeStatus,
		string(LeasedModeRate):   s.LeasedModeRate,
		string(LeasedModeEnd):    s.LeasedModeEnd,
		string(TurboModeStatus):  s.TurboModeStatus,
		string(TurboModeRate):    s.TurboModeRate,
		string(TurboModeEnd):     s.TurboModeEnd,
	}
}

// unset reports whether v is its type's zero value, which is stored as an
// absent property.
func unset(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case int32:
		return v == 0
	case time.Time:
		return v.IsZero()
	}
	return false
}

// stateFromEntity reads a device's row back; properties of unexpected
// types read as unset.
func stateFromEntity(e store.Entity) State {
	s := State{DeviceID: e.PartitionKey, ETag: e.ETag}
	p := e.Properties
	s.CurrentConfig, _ = p[string(CurrentConfig)].(string)
	s.SingleModeStatus, _ = p[string(SingleModeStatus)].(string)
	s.SingleModeRate, _ = p[string(SingleModeRate)].(int32)
	s.PanoModeStatus, _ = p[string(PanoModeStatus)].(string)
	s.PanoModeRate, _ = p[string(PanoModeRate)].(int32)
	s.LeasedModeStatus, _ = p[string(LeasedModeStatus)].(string)
	s.LeasedModeRate, _ = p[string(LeasedModeRate)].(int32)
	s.LeasedModeEnd, _ = p[string(LeasedModeEnd)].(time.Time)
	s.TurboModeStatus, _ = p[string(TurboModeStatus)].(string)
	s.TurboModeRate, _ = p[string(TurboModeRate)].(int32)
	s.TurboModeEnd, _ = p[string(TurboModeEnd)].(time.Time)
	s.LastModified, _ = p[PropLastModified].(time.Time)
	return s
}

func (f Field) valid() error {
	if !slices.Contains(Fields, f) {
		return fmt.Errorf("devices: unknown field %q: %w", string(f), store.ErrInvalidEntity)
	}
	return nil
}
