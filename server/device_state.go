package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/devices"
)

// deviceStatePaths are the update_mask paths, in field order, and the
// fields they change.
var deviceStatePaths = []struct {
	path  string
	field devices.Field
}{
	{"current_config", devices.CurrentConfig},
	{"single_mode_status", devices.SingleModeStatus},
	{"single_mode_rate", devices.SingleModeRate},
	{"pano_mode_status", devices.PanoModeStatus},
	{"pano_mode_rate", devices.PanoModeRate},
	{"leased_mode_status", devices.LeasedModeStatus},
	{"leased_mode_rate", devices.LeasedModeRate},
	{"leased_mode_end_time", devices.LeasedModeEnd},
	{"turbo_mode_status", devices.TurboModeStatus},
	{"turbo_mode_rate", devices.TurboModeRate},
	{"turbo_mode_end_time", devices.TurboModeEnd},
}

// deviceStateProperties names the request field behind each stored device
// property, so a store limit error points at the field the client sent.
var deviceStateProperties = func() map[string]string {
	m := map[string]string{devices.PropDeviceID: "device_id"}
	for _, p := range deviceStatePaths {
		m[string(p.field)] = p.path
	}
	return m
}()

// deviceStateService serves metadata.v1.DeviceStateService.
type deviceStateService struct {
	metadatav1.UnimplementedDeviceStateServiceServer
	repo *devices.Repository
	log  *slog.Logger
}

func deviceStateMessage(s devices.State) *metadatav1.DeviceState {
	return &metadatav1.DeviceState{
		DeviceId:          s.DeviceID,
		CurrentConfig:     s.CurrentConfig,
		SingleModeStatus:  s.SingleModeStatus,
		SingleModeRate:    s.SingleModeRate,
		PanoModeStatus:    s.PanoModeStatus,
		PanoModeRate:      s.PanoModeRate,
		LeasedModeStatus:  s.LeasedModeStatus,
		LeasedModeRate:    s.LeasedModeRate,
		LeasedModeEndTime: optionalTimestamp(s.LeasedModeEnd),
		TurboModeStatus:   s.TurboModeStatus,
		TurboModeRate:     s.TurboModeRate,
		TurboModeEndTime:  optionalTimestamp(s.TurboModeEnd),
		UpdateTime:        optionalTimestamp(s.LastModified),
		Etag:              s.ETag,
	}
}

// toDeviceState checks the fields of an update's device_state and reads
// them into a state.
func (v *violations) toDeviceState(m *metadatav1.DeviceState) devices.State {
	s := devices.State{
		DeviceID:         m.GetDeviceId(),
		CurrentConfig:    m.GetCurrentConfig(),
		SingleModeStatus: m.GetSingleModeStatus(),
		SingleModeRate:   m.GetSingleModeRate(),
		PanoModeStatus:   m.GetPanoModeStatus(),
		PanoModeRate:     m.GetPanoModeRate(),
		LeasedModeStatus: m.GetLeasedModeStatus(),
		LeasedModeRate:   m.GetLeasedModeRate(),
		TurboModeStatus:  m.GetTurboModeStatus(),
		TurboModeRate:    m.GetTurboModeRate(),
	}
	v.checkCameraID("device_state.device_id", s.DeviceID)
	for _, r := range []struct {
		field string
		rate  int32
	}{
		{"single_mode_rate", s.SingleModeRate}, {"pano_mode_rate", s.PanoModeRate},
		{"leased_mode_rate", s.LeasedModeRate}, {"turbo_mode_rate", s.TurboModeRate},
	} {
		if r.rate < 0 {
			v.add("device_state."+r.field, "must not be negative")
		}
	}
	if t := v.checkTime("device_state.leased_mode_end_time", m.GetLeasedModeEndTime()); t != nil {
		s.LeasedModeEnd = *t
	}
	if t := v.checkTime("device_state.turbo_mode_end_time", m.GetTurboModeEndTime()); t != nil {
		s.TurboModeEnd = *t
	}
	return s
}

// checkUpdateMask returns the fields an update changes. An empty mask
// names the fields m sets (AIP-134); "*" alone names every field.
func (v *violations) checkUpdateMask(mask *fieldmaskpb.FieldMask, m *metadatav1.DeviceState) []devices.Field {
	paths := mask.GetPaths()
	var fields []devices.Field
	switch {
	case len(paths) == 0:
		msg := m.ProtoReflect()
		for _, p := range deviceStatePaths {
			if msg.Has(msg.Descriptor().Fields().ByName(protoreflect.Name(p.path))) {
				fields = append(fields, p.field)
			}
		}
		return fields
	case len(paths) == 1 && paths[0] == "*":
		for _, p := range deviceStatePaths {
			fields = append(fields, p.field)
		}
		return fields
	}
paths:
	for i, path := range paths {
		for _, p := range deviceStatePaths {
			if p.path == path {
				fields = append(fields, p.field)
				continue paths
			}
		}
		v.maskViolation(i, path, "device_id", "update_time", "etag")
	}
	return fields
}

// deviceStatus maps a repository error of one device to a status.
func (s *deviceStateService) deviceStatus(ctx context.Context, deviceID string, err error) error {
	return errorWords{
		messages: map[error]string{
			store.ErrNotFound: fmt.Sprintf("device %q has no state", deviceID),
			store.ErrConflict: fmt.Sprintf("the state of device %q is not the version the request expects; read it again and retry", deviceID),
		},
		entity: "device_state", fields: deviceStateProperties, resource: map[string]string{"device_id": deviceID},
	}.status(ctx, s.log, err)
}

func (s *deviceStateService) GetDeviceState(ctx context.Context, req *metadatav1.GetDeviceStateRequest) (*metadatav1.GetDeviceStateResponse, error) {
	var v violations
	v.checkCameraID("device_id", req.GetDeviceId())
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.repo.Get(ctx, req.GetDeviceId())
	if err != nil {
		return nil, s.deviceStatus(ctx, req.GetDeviceId(), err)
	}
	return &metadatav1.GetDeviceStateResponse{DeviceState: deviceStateMessage(st)}, nil
}

func (s *deviceStateService) ListDeviceStates(ctx context.Context, req *metadatav1.ListDeviceStatesRequest) (*metadatav1.ListDeviceStatesResponse, error) {
	var v violations
	var err error
	resp := &metadatav1.ListDeviceStatesResponse{}
	resp.DeviceStates, resp.NextPageToken, err = readPage(ctx, s.log, &v, pageQuery{
		method:   metadatav1.DeviceStateService_ListDeviceStates_FullMethodName,
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	}, func(limit int, resume *store.Cursor) ([]devices.State, *store.Cursor, error) {
		return s.repo.List(ctx, limit, resume)
	}, deviceStateMessage)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *deviceStateService) UpdateDeviceState(ctx context.Context, req *metadatav1.UpdateDeviceStateRequest) (*metadatav1.UpdateDeviceStateResponse, error) {
	var v violations
	m := req.GetDeviceState()
	if m == nil {
		v.add("device_state", "required")
		return nil, v.err()
	}
	state := v.toDeviceState(m)
	fields := v.checkUpdateMask(req.GetUpdateMask(), m)
	v.checkETag("device_state.etag", m.GetEtag())
	if err := v.err(); err != nil {
		return nil, err
	}
	st, err := s.repo.Update(ctx, devices.Update{
		State: state, Fields: fields, AllowMissing: req.GetAllowMissing(), IfMatch: m.GetEtag(),
	})
	if err != nil {
		return nil, s.deviceStatus(ctx, state.DeviceID, err)
	}
	return &metadatav1.UpdateDeviceStateResponse{DeviceState: deviceStateMessage(st)}, nil
}

func (s *deviceStateService) DeleteDeviceState(ctx context.Context, req *metadatav1.DeleteDeviceStateRequest) (*metadatav1.DeleteDeviceStateResponse, error) {
	var v violations
	v.checkCameraID("device_id", req.GetDeviceId())
	v.checkETag("etag", req.GetEtag())
	if err := v.err(); err != nil {
		return nil, err
	}
	if err := s.repo.Delete(ctx, req.GetDeviceId(), req.GetEtag()); err != nil {
		return nil, s.deviceStatus(ctx, req.GetDeviceId(), err)
	}
	return &metadatav1.DeleteDeviceStateResponse{}, nil
}

// optionalTimestamp is t as a timestamp, nil for the zero time.
func optionalTimestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
