package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
)

// Bounds of the fleet requests' ranges.
const (
	// maxFleetDays bounds the days of daily counts and of a coverage: a
	// year, a leap year's included.
	maxFleetDays        = 366
	defaultLookBack     = fleet.DefaultLookBack
	maxExpectedInterval = 24 * time.Hour
)

type fleetService struct {
	metadatav1.UnimplementedFleetServiceServer
	views map[images.Kind]*fleet.View
	log   *slog.Logger
}

// fleetImage wraps an image in the FleetImage field of its kind.
func fleetImage(kind images.Kind) func(images.Image) *metadatav1.FleetImage {
	switch kind {
	case images.Pano:
		return func(img images.Image) *metadatav1.FleetImage {
			return &metadatav1.FleetImage{Image: &metadatav1.FleetImage_Pano{Pano: panoImageFromImage(img)}}
		}
	case images.PreStitch:
		return func(img images.Image) *metadatav1.FleetImage {
			return &metadatav1.FleetImage{Image: &metadatav1.FleetImage_PreStitch{PreStitch: preStitchImageFromImage(img)}}
		}
	}
	return func(img images.Image) *metadatav1.FleetImage {
		return &metadatav1.FleetImage{Image: &metadatav1.FleetImage_Single{Single: singleImageFromImage(img)}}
	}
}

func cameraMessage(c fleet.Camera) *metadatav1.Camera {
	m := &metadatav1.Camera{CameraId: c.ID, FirstCapturedAt: timestamppb.New(c.First), LatestCapturedAt: timestamppb.New(c.Latest)}
	for _, d := range c.Days {
		m.DailyCounts = append(m.DailyCounts, &metadatav1.DailyImageCount{Day: timestamppb.New(d.Day), Images: d.Images})
	}
	return m
}

// checkView is the view of the request's image type.
func (s *fleetService) checkView(v *violations, t metadatav1.ImageType) *fleet.View {
	kind, ok := imageTypes[t]
	switch {
	case t == metadatav1.ImageType_IMAGE_TYPE_UNSPECIFIED:
		v.add("image_type", "required")
	case !ok:
		v.add("image_type", fmt.Sprintf("unknown image type %d", t))
	}
	return s.views[kind]
}

// checkPrefix checks an optional camera id prefix.
func (v *violations) checkPrefix(field, prefix string) {
	if prefix != "" {
		v.checkCameraID(field, prefix)
	}
}

// afterOf is the camera id a page of cameras resumes after.
func afterOf(c *store.Cursor) string {
	if c == nil {
		return ""
	}
	return c.PartitionKey
}

// cursorAfter is the cursor of the page after camera id next; nil when
// next is empty (no page remains).
func cursorAfter(next string) *store.Cursor {
	if next == "" {
		return nil
	}
	return &store.Cursor{PartitionKey: next}
}

func (s *fleetService) ListCameras(ctx context.Context, req *metadatav1.ListCamerasRequest) (*metadatav1.ListCamerasResponse, error) {
	var v violations
	view := s.checkView(&v, req.GetImageType())
	v.checkPrefix("camera_id_prefix", req.GetCameraIdPrefix())
	from, to := v.checkDailyCounts(req.GetDailyCountsStartTime(), req.GetDailyCountsEndTime())
	q := pageQuery{method: "ListCameras", params: []string{req.GetImageType().String(), req.GetCameraIdPrefix(),
		formatTime(req.GetDailyCountsStartTime()), formatTime(req.GetDailyCountsEndTime())}, pageSize: req.GetPageSize(), pageToken: req.GetPageToken()}
	cams, token, err := readPage(ctx, s.log, &v, q, func(limit int, resume *store.Cursor) ([]fleet.Camera, *store.Cursor, error) {
		cams, next, err := view.Cameras(ctx, fleet.CameraQuery{Prefix: req.GetCameraIdPrefix(), After: afterOf(resume), Limit: limit, DaysFrom: from, DaysTo: to})
		return cams, cursorAfter(next), err
	}, cameraMessage)
	if err != nil {
		return nil, err
	}
	return &metadatav1.ListCamerasResponse{Cameras: cams, NextPageToken: token}, nil
}

// checkDailyCounts reads the optional range of daily counts as whole UTC days.
func (v *violations) checkDailyCounts(start, end *timestamppb.Timestamp) (from, to time.Time) {
	if (start == nil) != (end == nil) {
		v.add("daily_counts_end_time", "give both daily_counts_start_time and daily_counts_end_time, or neither")
		return
	}
	s, e := v.checkTime("daily_counts_start_time", start), v.checkTime("daily_counts_end_time", end)
	if s == nil || e == nil {
		return
	}
	from, to = s.UTC().Truncate(24*time.Hour), e.UTC().Add(24*time.Hour-1).Truncate(24*time.Hour)
	switch {
	case !s.Before(*e):
		v.add("daily_counts_end_time", "must be after daily_counts_start_time")
	case to.Sub(from) > maxFleetDays*24*time.Hour:
		v.add("daily_counts_end_time", fmt.Sprintf("at most %d days after daily_counts_start_time", maxFleetDays))
	}
	return from, to
}

func (s *fleetService) ListSilentCameras(ctx context.Context, req *metadatav1.ListSilentCamerasRequest) (*metadatav1.ListSilentCamerasResponse, error) {
	var v violations
	view := s.checkView(&v, req.GetImageType())
	v.checkPrefix("camera_id_prefix", req.GetCameraIdPrefix())
	silentFor, lookBack := v.checkSilence(req.GetSilentFor(), req.GetLookBack())
	q := pageQuery{method: "ListSilentCameras", params: []string{req.GetImageType().String(), req.GetCameraIdPrefix(),
		silentFor.String(), lookBack.String()}, pageSize: req.GetPageSize(), pageToken: req.GetPageToken()}
	var asOf time.Time
	cams, token, err := readPage(ctx, s.log, &v, q, func(limit int, resume *store.Cursor) ([]fleet.Camera, *store.Cursor, error) {
		cams, next, now, err := view.Silent(ctx, fleet.SilentQuery{Prefix: req.GetCameraIdPrefix(), After: afterOf(resume), Limit: limit,
			SilentFor: silentFor, LookBack: lookBack})
		asOf = now
		return cams, cursorAfter(next), err
	}, cameraMessage)
	if err != nil {
		return nil, err
	}
	return &metadatav1.ListSilentCamerasResponse{Cameras: cams, NextPageToken: token, AsOf: timestamppb.New(asOf)}, nil
}

// checkSilence reads silent_for and look_back.
func (v *violations) checkSilence(silent, back *durationpb.Duration) (silentFor, lookBack time.Duration) {
	silentFor, lookBack = v.checkDuration("silent_for", silent), v.checkDuration("look_back", back)
	switch {
	case silent == nil:
		v.add("silent_for", "required")
	case silentFor < time.Minute:
		v.add("silent_for", "must be at least a minute")
	}
	if lookBack == 0 {
		lookBack = defaultLookBack
	}
	if lookBack <= silentFor {
		v.add("look_back", "must be longer than silent_for")
	}
	return silentFor, lookBack
}

// checkDuration reads an optional duration that must not be negative;
// nil is 0.
func (v *violations) checkDuration(field string, d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
		v.add(field, "must be a valid duration, not negative")
		return 0
	}
	return d.AsDuration()
}

func (s *fleetService) GetCoverage(ctx context.Context, req *metadatav1.GetCoverageRequest) (*metadatav1.GetCoverageResponse, error) {
	var v violations
	view := s.checkView(&v, req.GetImageType())
	v.checkCameraID("camera_id", req.GetCameraId())
	start, end := v.checkWindow(req.GetStartTime(), req.GetEndTime(), maxFleetDays*24*time.Hour)
	for field, t := range map[string]time.Time{"start_time": start, "end_time": end} {
		if !t.IsZero() && !t.Equal(t.Truncate(time.Minute)) {
			v.add(field, "must be a whole minute")
		}
	}
	every := v.checkDuration("expected_interval", req.GetExpectedInterval())
	switch {
	case every == 0:
		every = time.Minute
	case every%time.Minute != 0 || every > maxExpectedInterval:
		v.add("expected_interval", "must be whole minutes, at most a day")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	c, err := view.Coverage(ctx, req.GetCameraId(), start, end, every)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	out := &metadatav1.GetCoverageResponse{CoveredFraction: c.Covered, Images: c.Images}
	for _, g := range c.Gaps {
		out.Gaps = append(out.Gaps, &metadatav1.CoverageGap{StartTime: timestamppb.New(g.Start), EndTime: timestamppb.New(g.End)})
	}
	return out, nil
}

// checkWindow reads a required [start_time, end_time) of at most longest.
func (v *violations) checkWindow(start, end *timestamppb.Timestamp, longest time.Duration) (time.Time, time.Time) {
	if start == nil {
		v.add("start_time", "required")
	}
	if end == nil {
		v.add("end_time", "required")
	}
	s, e := v.checkTime("start_time", start), v.checkTime("end_time", end)
	if s == nil || e == nil {
		return time.Time{}, time.Time{}
	}
	switch {
	case !s.Before(*e):
		v.add("end_time", "must be after start_time")
	case e.Sub(*s) > longest:
		v.add("end_time", fmt.Sprintf("must be at most %s after start_time", longest))
	}
	return s.UTC(), e.UTC()
}

func (s *fleetService) ListFleetImages(ctx context.Context, req *metadatav1.ListFleetImagesRequest) (*metadatav1.ListFleetImagesResponse, error) {
	var v violations
	view := s.checkView(&v, req.GetImageType())
	start, end := v.checkWindow(req.GetStartTime(), req.GetEndTime(), fleet.MaxWindow)
	q := pageQuery{method: "ListFleetImages", params: []string{req.GetImageType().String(), formatTime(req.GetStartTime()), formatTime(req.GetEndTime())},
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken()}
	var kind images.Kind
	if view != nil {
		kind = view.Kind()
	}
	imgs, token, err := readPage(ctx, s.log, &v, q, func(limit int, resume *store.Cursor) ([]images.Image, *store.Cursor, error) {
		return view.Moment(ctx, start, end, limit, resume)
	}, fleetImage(kind))
	if err != nil {
		return nil, err
	}
	return &metadatav1.ListFleetImagesResponse{Images: imgs, NextPageToken: token}, nil
}
