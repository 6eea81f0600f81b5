package server

import (
	"context"
	"fmt"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// Deletes on purpose (store/retention/delete.go): one image, or a job
// deleting every image of one camera, which is a purge and is watched and
// cancelled as one.

func (s *retentionService) DeleteImage(ctx context.Context, req *metadatav1.DeleteImageRequest) (*metadatav1.DeleteImageResponse, error) {
	var v violations
	kind, ok := imageTypes[req.GetImageType()]
	if !ok {
		v.add("image_type", fmt.Sprintf("must be one of single, pano or pre-stitch, not %v", req.GetImageType()))
	}
	v.checkCameraID("camera_id", req.GetCameraId())
	if req.GetCapturedAt() == nil {
		v.add("captured_at", "required")
	}
	at := v.checkTime("captured_at", req.GetCapturedAt())
	if err := v.err(); err != nil {
		return nil, err
	}
	// A delete is how space comes back: it passes the free-space guard.
	err := s.engine.DeleteImage(diskspace.Exempt(ctx), retention.DeleteImageRequest{Kind: kind, CameraID: req.GetCameraId(), CapturedAt: *at})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &metadatav1.DeleteImageResponse{}, nil
}

func (s *retentionService) DeleteCameraImages(ctx context.Context, req *metadatav1.DeleteCameraImagesRequest) (*metadatav1.DeleteCameraImagesResponse, error) {
	var v violations
	v.checkCameraID("camera_id", req.GetCameraId())
	kinds := s.checkImageTypes(&v, req.GetImageTypes())
	if req.GetRowsPerSecond() < 0 {
		v.add("rows_per_second", "must not be negative")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	j, err := s.engine.Start(diskspace.Exempt(ctx), retention.StartRequest{Kinds: kinds, Camera: req.GetCameraId(), DryRun: req.GetDryRun(),
		RowsPerSecond: float64(req.GetRowsPerSecond())})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &metadatav1.DeleteCameraImagesResponse{Job: purgeJob(j)}, nil
}

// checkImageTypes are the kinds of a request's image types, every kind
// the engine purges when there are none.
func (s *retentionService) checkImageTypes(v *violations, types []metadatav1.ImageType) []images.Kind {
	if len(types) == 0 {
		return s.engine.Kinds()
	}
	var kinds []images.Kind
	for i, t := range types {
		kind, ok := imageTypes[t]
		if !ok {
			v.add(fmt.Sprintf("image_types[%d]", i), fmt.Sprintf("unknown image type %v", t))
			continue
		}
		kinds = append(kinds, kind)
	}
	return kinds
}
