package server

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

func (s *retentionService) PauseRetentionSchedule(ctx context.Context, _ *metadatav1.PauseRetentionScheduleRequest) (*metadatav1.PauseRetentionScheduleResponse, error) {
	state, err := s.engine.SetSchedulePaused(ctx, true)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	s.log.Info("retention schedule paused")
	return &metadatav1.PauseRetentionScheduleResponse{Schedule: s.retentionSchedule(state)}, nil
}

func (s *retentionService) ResumeRetentionSchedule(ctx context.Context, _ *metadatav1.ResumeRetentionScheduleRequest) (*metadatav1.ResumeRetentionScheduleResponse, error) {
	state, err := s.engine.SetSchedulePaused(ctx, false)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	s.log.Info("retention schedule resumed")
	return &metadatav1.ResumeRetentionScheduleResponse{Schedule: s.retentionSchedule(state)}, nil
}

func (s *retentionService) GetRetentionSchedule(ctx context.Context, _ *metadatav1.GetRetentionScheduleRequest) (*metadatav1.GetRetentionScheduleResponse, error) {
	state, err := s.engine.ScheduleState(ctx)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &metadatav1.GetRetentionScheduleResponse{Schedule: s.retentionSchedule(state)}, nil
}

// retentionSchedule is this replica's schedule with the shared state.
func (s *retentionService) retentionSchedule(state retention.ScheduleState) *metadatav1.RetentionSchedule {
	out := &metadatav1.RetentionSchedule{Paused: state.Paused}
	if s.schedule.Interval > 0 {
		out.Configured, out.UsePolicies = true, s.schedule.UsePolicies
		out.RetentionDays = int32(s.schedule.Retention / policy.Days(1))
		out.Interval = durationpb.New(s.schedule.Interval)
	}
	if !state.Changed.IsZero() {
		out.UpdateTime = timestamppb.New(state.Changed)
	}
	return out
}
