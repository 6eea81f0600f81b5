package acquisition

import (
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
)

// InstanceRowKey is the row key of every instance row; the partition key
// names the instance.
const InstanceRowKey = "instance"

// EntityPrefix starts the ids of the durable-entity instances that hold
// each camera's state: they run for as long as the camera exists and are
// not acquisitions, so they are never listed as active.
const EntityPrefix = "@camerastate@"

// Status is where an instance is in its life, named as Durable Functions
// names it.
type Status string

// The statuses of an instance.
const (
	Pending    Status = "Pending"
	Running    Status = "Running"
	Completed  Status = "Completed"
	Failed     Status = "Failed"
	Terminated Status = "Terminated"
)

// Active reports whether an instance with the status is in progress.
func (s Status) Active() bool { return s == Pending || s == Running }

// Instance is one run of an image acquisition orchestration.
type Instance struct {
	ID       string
	DeviceID string
	Status   Status
	// Created is when the run was created.
	Created time.Time
	// LastUpdated is when the run last changed.
	LastUpdated time.Time
}

// Property names of the stored entities, those of the Durable Functions
// instance table where it has one.
const (
	PropDeviceID    = "DeviceId"
	PropStatus      = "RuntimeStatus"
	PropCreated     = "CreatedTime"
	PropLastUpdated = "LastUpdatedTime"
)

func properties(in Instance) store.Properties {
	return store.Properties{
		PropDeviceID:    in.DeviceID,
		PropStatus:      string(in.Status),
		PropCreated:     in.Created,
		PropLastUpdated: in.LastUpdated,
	}
}

func instanceFromEntity(e store.Entity) Instance {
	in := Instance{ID: e.PartitionKey}
	in.DeviceID, _ = e.Properties[PropDeviceID].(string)
	status, _ := e.Properties[PropStatus].(string)
	in.Status = Status(status)
	in.Created, _ = e.Properties[PropCreated].(time.Time)
	in.LastUpdated, _ = e.Properties[PropLastUpdated].(time.Time)
	return in
}

// activeKey is the key of in's active row; ok is false when in has none.
func activeKey(in Instance) (key store.Key, ok bool) {
	if !in.Status.Active() || strings.HasPrefix(in.ID, EntityPrefix) {
		return store.Key{}, false
	}
	return store.Key{PartitionKey: store.MinutePartitionKey(in.LastUpdated), RowKey: in.ID}, true
}
