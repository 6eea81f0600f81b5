package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/video"
)

// videoFields names the request field behind each stored video property.
var videoFields = map[string]string{
	video.PropCameraID:    "camera_id",
	video.PropCapturedAt:  "captured_at",
	video.PropBlobURI:     "blob_uri",
	video.PropContentType: "content_type",
	video.PropAttributes:  "attributes",
}

// videoService serves metadata.v1.VideoMetadataService.
type videoService struct {
	metadatav1.UnimplementedVideoMetadataServiceServer
	repo *video.Repository
	log  *slog.Logger
}

func videoMessage(m video.Metadata) *metadatav1.VideoMetadata {
	return &metadatav1.VideoMetadata{
		CameraId:    m.CameraID,
		CapturedAt:  timestamppb.New(m.CapturedAt),
		Duration:    durationpb.New(m.Duration),
		BlobUri:     m.BlobURI,
		ContentType: m.ContentType,
		SizeBytes:   m.SizeBytes,
		Attributes:  m.Attributes,
		RowKey:      m.RowKey,
	}
}

func (s *videoService) CreateVideoMetadata(ctx context.Context, req *metadatav1.CreateVideoMetadataRequest) (*metadatav1.CreateVideoMetadataResponse, error) {
	var v violations
	msg := req.GetMetadata()
	if msg == nil {
		v.add("metadata", "required")
		return nil, v.err()
	}
	m := video.Metadata{
		CameraID:    msg.GetCameraId(),
		BlobURI:     msg.GetBlobUri(),
		ContentType: msg.GetContentType(),
		SizeBytes:   msg.GetSizeBytes(),
		Attributes:  msg.GetAttributes(),
	}
	m.CapturedAt = v.checkRecording(m.CameraID, msg.GetCapturedAt(), m.SizeBytes)
	if d := msg.GetDuration(); d != nil {
		switch {
		case d.CheckValid() != nil:
			v.add("metadata.duration", "not a valid duration")
		case d.AsDuration() < 0:
			v.add("metadata.duration", "must not be negative")
		case !proto.Equal(durationpb.New(d.AsDuration()), d):
			v.add("metadata.duration", "too long")
		default:
			m.Duration = d.AsDuration()
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	stored, err := s.repo.Create(ctx, m)
	if err != nil {
		return nil, errorWords{
			messages: map[error]string{store.ErrAlreadyExists: fmt.Sprintf("camera %q already has a different recording starting at %s",
				m.CameraID, m.CapturedAt.Format(time.RFC3339Nano))},
			entity: "metadata", fields: videoFields, resource: map[string]string{"camera_id": m.CameraID},
		}.status(ctx, s.log, err)
	}
	return &metadatav1.CreateVideoMetadataResponse{Metadata: videoMessage(stored)}, nil
}

func (s *videoService) GetLatestVideoMetadata(ctx context.Context, req *metadatav1.GetLatestVideoMetadataRequest) (*metadatav1.GetLatestVideoMetadataResponse, error) {
	var v violations
	v.checkCameraID("camera_id", req.GetCameraId())
	if err := v.err(); err != nil {
		return nil, err
	}
	m, err := s.repo.Latest(ctx, req.GetCameraId())
	if err != nil {
		return nil, errorWords{messages: map[error]string{
			store.ErrNotFound: fmt.Sprintf("camera %q has no recording", req.GetCameraId()),
		}, resource: map[string]string{"camera_id": req.GetCameraId()}}.status(ctx, s.log, err)
	}
	return &metadatav1.GetLatestVideoMetadataResponse{Metadata: videoMessage(m)}, nil
}

func (s *videoService) ListVideoMetadata(ctx context.Context, req *metadatav1.ListVideoMetadataRequest) (*metadatav1.ListVideoMetadataResponse, error) {
	p, err := checkCameraPage(listRequest{
		method:   metadatav1.VideoMetadataService_ListVideoMetadata_FullMethodName,
		cameraID: req.GetCameraId(), start: req.GetStartTime(), end: req.GetEndTime(),
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, err
	}
	ms, next, err := s.repo.List(ctx, video.ListOptions{
		CameraID: req.GetCameraId(), Start: p.span.Start, End: p.span.End, Limit: p.limit, Resume: p.resume,
	})
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &metadatav1.ListVideoMetadataResponse{}
	resp.Metadata, resp.NextPageToken = listPage(p.fingerprint, ms, next, videoMessage)
	return resp, nil
}
