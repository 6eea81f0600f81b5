package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// watchPoll is how often WatchPurge looks at a job that another process may
// be running; changes made in this process are sent at once.
const watchPoll = time.Second

// maxRetentionDays keeps a cutoff computed from retention_days inside the
// span capture times can have.
const maxRetentionDays = 100_000

// imageTypes maps the API's image types to the store's kinds.
var imageTypes = map[metadatav1.ImageType]images.Kind{
	metadatav1.ImageType_IMAGE_TYPE_SINGLE:     images.Single,
	metadatav1.ImageType_IMAGE_TYPE_PANO:       images.Pano,
	metadatav1.ImageType_IMAGE_TYPE_PRE_STITCH: images.PreStitch,
}

var purgeStates = map[retention.State]metadatav1.PurgeState{
	retention.Pending:   metadatav1.PurgeState_PURGE_STATE_PENDING,
	retention.Running:   metadatav1.PurgeState_PURGE_STATE_RUNNING,
	retention.Succeeded: metadatav1.PurgeState_PURGE_STATE_SUCCEEDED,
	retention.Failed:    metadatav1.PurgeState_PURGE_STATE_FAILED,
	retention.Cancelled: metadatav1.PurgeState_PURGE_STATE_CANCELLED,
}

func stateOf(s metadatav1.PurgeState) (retention.State, bool) { return keyOf(purgeStates, s) }

func imageTypeOf(k images.Kind) metadatav1.ImageType {
	t, _ := keyOf(imageTypes, k) // IMAGE_TYPE_UNSPECIFIED for none
	return t
}

// keyOf is the key m maps to v, for reading one of this package's enum
// maps backwards; the maps are a handful of entries, each value once.
func keyOf[K, V comparable](m map[K]V, v V) (K, bool) {
	for k, mv := range m {
		if mv == v {
			return k, true
		}
	}
	var zero K
	return zero, false
}

// retentionService serves metadata.v1.RetentionService.
type retentionService struct {
	metadatav1.UnimplementedRetentionServiceServer
	engine   *retention.Engine
	minDays  int32
	schedule retention.Schedule
	log      *slog.Logger
	// stopping is closed when the server shuts down: watches end then.
	stopping <-chan struct{}
}

func (s *retentionService) StartPurge(ctx context.Context, req *metadatav1.StartPurgeRequest) (*metadatav1.StartPurgeResponse, error) {
	var v violations
	kinds := s.checkImageTypes(&v, req.GetImageTypes())
	now := s.engine.Now()
	var cutoff time.Time
	switch c := req.GetCutoff().(type) {
	case *metadatav1.StartPurgeRequest_RetentionDays:
		if c.RetentionDays < s.minDays {
			v.add("retention_days", fmt.Sprintf("must be at least %d", s.minDays))
		} else if c.RetentionDays > maxRetentionDays {
			v.add("retention_days", fmt.Sprintf("must be at most %d", maxRetentionDays))
		} else {
			cutoff = now.Add(-policy.Days(int(c.RetentionDays)))
		}
	case *metadatav1.StartPurgeRequest_CutoffTime:
		// The floor guards a cutoff as it guards retention_days: a typo of
		// the year, or "now", would purge everything. A dry run is held to
		// it too, so that it rehearses what the real call would be told.
		if t := v.checkTime("cutoff_time", c.CutoffTime); t != nil {
			latest := now.Add(-policy.Days(int(s.minDays)))
			switch {
			case t.After(now):
				v.add("cutoff_time", "must not be in the future")
			case t.After(latest):
				v.add("cutoff_time", fmt.Sprintf("must be at or before %s: the retention floor keeps the last %d × 24 hours",
					latest.UTC().Format(time.RFC3339), s.minDays))
			}
			cutoff = *t
		}
	case nil:
		if !req.GetUsePolicies() {
			v.add("cutoff", "one of retention_days, cutoff_time or use_policies is required")
		}
	}
	if req.GetUsePolicies() && req.GetCutoff() != nil {
		v.add("use_policies", "must not be set with retention_days or cutoff_time")
	}
	if req.GetRowsPerSecond() < 0 {
		v.add("rows_per_second", "must not be negative")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	// A purge is how space comes back: its records pass the free-space guard.
	j, err := s.engine.Start(diskspace.Exempt(ctx), retention.StartRequest{Kinds: kinds, Cutoff: cutoff, DryRun: req.GetDryRun(),
		RowsPerSecond: float64(req.GetRowsPerSecond()), UsePolicies: req.GetUsePolicies()})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &metadatav1.StartPurgeResponse{Job: purgeJob(j)}, nil
}

func (s *retentionService) GetPurge(ctx context.Context, req *metadatav1.GetPurgeRequest) (*metadatav1.GetPurgeResponse, error) {
	j, err := s.get(ctx, req.GetJobId())
	if err != nil {
		return nil, err
	}
	return &metadatav1.GetPurgeResponse{Job: purgeJob(j)}, nil
}

func (s *retentionService) get(ctx context.Context, id string) (*retention.Job, error) {
	var v violations
	v.checkCameraID("job_id", id)
	if err := v.err(); err != nil {
		return nil, err
	}
	j, err := s.engine.Get(ctx, id)
	if err != nil {
		return nil, errorWords{messages: map[error]string{store.ErrNotFound: fmt.Sprintf("purge %q not found", id)},
			resource: map[string]string{"job_id": id}}.status(ctx, s.log, err)
	}
	return j, nil
}

func (s *retentionService) ListPurges(ctx context.Context, req *metadatav1.ListPurgesRequest) (*metadatav1.ListPurgesResponse, error) {
	var v violations
	var state retention.State
	if req.GetState() != metadatav1.PurgeState_PURGE_STATE_UNSPECIFIED {
		var ok bool
		if state, ok = stateOf(req.GetState()); !ok {
			v.add("state", fmt.Sprintf("unknown purge state %v", req.GetState()))
		}
	}
	var err error
	resp := &metadatav1.ListPurgesResponse{}
	resp.Jobs, resp.NextPageToken, err = readPage(ctx, s.log, &v, pageQuery{
		method: metadatav1.RetentionService_ListPurges_FullMethodName, params: []string{string(state)},
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	}, func(limit int, resume *store.Cursor) ([]*retention.Job, *store.Cursor, error) {
		return s.engine.ListInState(ctx, state, limit, resume)
	}, purgeJob)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// CancelPurge asks a job to stop at its next task boundary.
func (s *retentionService) CancelPurge(ctx context.Context, req *metadatav1.CancelPurgeRequest) (*metadatav1.CancelPurgeResponse, error) {
	var v violations
	v.checkCameraID("job_id", req.GetJobId())
	if err := v.err(); err != nil {
		return nil, err
	}
	// Cancelling is how an operator stops a deletion, so its record passes
	// the free-space guard as the purge's own records do: a full disk must
	// not leave a purge running that its operator has told to stop.
	j, err := s.engine.Cancel(diskspace.Exempt(ctx), req.GetJobId())
	if err != nil {
		return nil, errorWords{messages: map[error]string{
			store.ErrNotFound:     fmt.Sprintf("purge %q not found", req.GetJobId()),
			retention.ErrJobEnded: fmt.Sprintf("purge %q has ended; only a pending or running purge can be cancelled", req.GetJobId()),
		}, resource: map[string]string{"job_id": req.GetJobId()}}.status(ctx, s.log, err)
	}
	return &metadatav1.CancelPurgeResponse{Job: purgeJob(j)}, nil
}

// WatchPurge sends the job now and at every change until it ends.
func (s *retentionService) WatchPurge(req *metadatav1.WatchPurgeRequest, stream grpc.ServerStreamingServer[metadatav1.WatchPurgeResponse]) error {
	ctx := stream.Context()
	var last *metadatav1.PurgeJob
	for {
		changed := s.engine.Changed()
		j, err := s.get(ctx, req.GetJobId())
		if err != nil {
			return err
		}
		if snapshot := purgeJob(j); !proto.Equal(snapshot, last) {
			if err := stream.Send(&metadatav1.WatchPurgeResponse{Job: snapshot}); err != nil {
				return err
			}
			last = snapshot
		}
		if j.State.Terminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			return toStatus(ctx, s.log, ctx.Err())
		case <-s.stopping:
			// A watch could outlast any shutdown timeout; the client
			// watches again on another replica or after the restart.
			return status.Error(codes.Unavailable, "server shutting down; watch again")
		case <-changed:
		case <-time.After(watchPoll):
		}
	}
}

func purgeJob(j *retention.Job) *metadatav1.PurgeJob {
	totals := j.Totals()
	out := &metadatav1.PurgeJob{
		JobId:               j.ID,
		CutoffTime:          timestamppb.New(j.Cutoff),
		DryRun:              j.DryRun,
		State:               purgeStates[j.State],
		DevicesTotal:        totals.DevicesTotal,
		DevicesDone:         totals.DevicesDone,
		DevicesFailed:       totals.DevicesFailed,
		MetadataRowsDeleted: totals.MetadataRows,
		IndexRowsDeleted:    totals.IndexRows,
		CreateTime:          timestamppb.New(j.Created),
		Error:               j.Error,
		CancelRequested:     j.CancelRequested,
		RowsPerSecond:       int32(j.RowsPerSecond),
		UsePolicies:         j.UsePolicies,
		CameraId:            j.Camera,
		DevicesHeld:         totals.DevicesHeld,
		MetadataRowsThinned: totals.ThinnedRows,

		MetadataRowsDeletedLowerBound: totals.MetadataRowsLowerBound,
	}
	if !j.Started.IsZero() {
		out.StartTime = timestamppb.New(j.Started)
	}
	if !j.Ended.IsZero() {
		out.EndTime = timestamppb.New(j.Ended)
	}
	for _, k := range j.Kinds {
		t := imageTypeOf(k.Kind)
		out.ImageTypes = append(out.ImageTypes, t)
		out.TypeCounts = append(out.TypeCounts, &metadatav1.PurgeCounts{
			ImageType:           t,
			DevicesTotal:        k.Counts.DevicesTotal,
			DevicesDone:         k.Counts.DevicesDone,
			DevicesFailed:       k.Counts.DevicesFailed,
			MetadataRowsDeleted: k.Counts.MetadataRows,
			IndexRowsDeleted:    k.Counts.IndexRows,
			DevicesHeld:         k.Counts.DevicesHeld,
			MetadataRowsThinned: k.Counts.ThinnedRows,

			MetadataRowsDeletedLowerBound: k.Counts.MetadataRowsLowerBound,
		})
	}
	return out
}
