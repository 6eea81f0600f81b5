package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/acquisition"
)

// runtimeStatuses maps the API's runtime statuses to the store's.
var runtimeStatuses = map[metadatav1.RuntimeStatus]acquisition.Status{
	metadatav1.RuntimeStatus_RUNTIME_STATUS_PENDING:    acquisition.Pending,
	metadatav1.RuntimeStatus_RUNTIME_STATUS_RUNNING:    acquisition.Running,
	metadatav1.RuntimeStatus_RUNTIME_STATUS_COMPLETED:  acquisition.Completed,
	metadatav1.RuntimeStatus_RUNTIME_STATUS_FAILED:     acquisition.Failed,
	metadatav1.RuntimeStatus_RUNTIME_STATUS_TERMINATED: acquisition.Terminated,
}

func runtimeStatusOf(s acquisition.Status) metadatav1.RuntimeStatus {
	rs, _ := keyOf(runtimeStatuses, s) // RUNTIME_STATUS_UNSPECIFIED for none
	return rs
}

// acquisitionInstanceService serves metadata.v1.AcquisitionInstanceService.
type acquisitionInstanceService struct {
	metadatav1.UnimplementedAcquisitionInstanceServiceServer
	repo *acquisition.Repository
	log  *slog.Logger
}

func acquisitionInstanceMessage(in acquisition.Instance) *metadatav1.AcquisitionInstance {
	return &metadatav1.AcquisitionInstance{
		InstanceId:     in.ID,
		DeviceId:       in.DeviceID,
		RuntimeStatus:  runtimeStatusOf(in.Status),
		CreateTime:     optionalTimestamp(in.Created),
		LastUpdateTime: optionalTimestamp(in.LastUpdated),
	}
}

func (s *acquisitionInstanceService) RecordAcquisitionInstance(ctx context.Context, req *metadatav1.RecordAcquisitionInstanceRequest) (*metadatav1.RecordAcquisitionInstanceResponse, error) {
	var v violations
	m := req.GetInstance()
	if m == nil {
		v.add("instance", "required")
		return nil, v.err()
	}
	in := acquisition.Instance{ID: m.GetInstanceId(), DeviceID: m.GetDeviceId()}
	v.checkCameraID("instance.instance_id", in.ID)
	v.checkCameraID("instance.device_id", in.DeviceID)
	switch status, ok := runtimeStatuses[m.GetRuntimeStatus()]; {
	case m.GetRuntimeStatus() == metadatav1.RuntimeStatus_RUNTIME_STATUS_UNSPECIFIED:
		v.add("instance.runtime_status", "required")
	case !ok:
		v.add("instance.runtime_status", fmt.Sprintf("unknown runtime status %v", m.GetRuntimeStatus()))
	default:
		in.Status = status
	}
	in.Created = timeOrZero(v.checkTime("instance.create_time", m.GetCreateTime()))
	in.LastUpdated = timeOrZero(v.checkTime("instance.last_update_time", m.GetLastUpdateTime()))
	if err := v.err(); err != nil {
		return nil, err
	}
	stored, err := s.repo.Record(ctx, in)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &metadatav1.RecordAcquisitionInstanceResponse{Instance: acquisitionInstanceMessage(stored)}, nil
}

func (s *acquisitionInstanceService) ListActiveAcquisitionInstances(ctx context.Context, req *metadatav1.ListActiveAcquisitionInstancesRequest) (*metadatav1.ListActiveAcquisitionInstancesResponse, error) {
	var v violations
	within := req.GetWithin()
	switch {
	case within == nil:
		v.add("within", "required")
	case within.CheckValid() != nil:
		v.add("within", "not a valid duration")
	case within.AsDuration() <= 0:
		v.add("within", "must be positive")
	}
	var err error
	resp := &metadatav1.ListActiveAcquisitionInstancesResponse{}
	resp.Instances, resp.NextPageToken, err = readPage(ctx, s.log, &v, pageQuery{
		method: metadatav1.AcquisitionInstanceService_ListActiveAcquisitionInstances_FullMethodName,
		params: []string{within.AsDuration().String()}, pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	}, func(limit int, resume *store.Cursor) ([]acquisition.Instance, *store.Cursor, error) {
		return s.repo.ListActive(ctx, acquisition.ListOptions{Within: within.AsDuration(), Limit: limit, Resume: resume})
	}, acquisitionInstanceMessage)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// timeOrZero is *t, or the zero time for nil.
func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
