package server

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
)

// preStitchImageService serves metadata.v1.PreStitchImageMetadataService.
type preStitchImageService struct {
	metadatav1.UnimplementedPreStitchImageMetadataServiceServer
	h *imageHandler[*metadatav1.PreStitchImageMetadata]
}

func preStitchImageFromImage(img images.Image) *metadatav1.PreStitchImageMetadata {
	return &metadatav1.PreStitchImageMetadata{
		CameraId:               img.CameraID,
		CapturedAt:             timestamppb.New(img.CapturedAt),
		BlobUri:                img.BlobURI,
		ContentType:            img.ContentType,
		SizeBytes:              img.SizeBytes,
		Width:                  img.Width,
		Height:                 img.Height,
		Attributes:             img.Attributes,
		PanoImageCorrelationId: img.PanoImageCorrelationID,
		RowKey:                 img.RowKey,
	}
}

func (s *preStitchImageService) CreatePreStitchImageMetadata(ctx context.Context, req *metadatav1.CreatePreStitchImageMetadataRequest) (*metadatav1.CreatePreStitchImageMetadataResponse, error) {
	m, err := s.h.create(ctx, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	return &metadatav1.CreatePreStitchImageMetadataResponse{Metadata: m}, nil
}

func (s *preStitchImageService) BatchCreatePreStitchImageMetadata(ctx context.Context, req *metadatav1.BatchCreatePreStitchImageMetadataRequest) (*metadatav1.BatchCreatePreStitchImageMetadataResponse, error) {
	created, err := s.h.batchCreate(ctx, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	results := make([]*metadatav1.BatchCreatePreStitchImageMetadataResult, len(created))
	for i, c := range created {
		results[i] = &metadatav1.BatchCreatePreStitchImageMetadataResult{Metadata: c.metadata, AlreadyExisted: c.existed, Status: c.status}
	}
	return &metadatav1.BatchCreatePreStitchImageMetadataResponse{Results: results}, nil
}

func (s *preStitchImageService) GetLatestPreStitchImageMetadata(ctx context.Context, req *metadatav1.GetLatestPreStitchImageMetadataRequest) (*metadatav1.GetLatestPreStitchImageMetadataResponse, error) {
	m, err := s.h.latest(ctx, req.GetCameraId(), images.Filter{})
	if err != nil {
		return nil, err
	}
	return &metadatav1.GetLatestPreStitchImageMetadataResponse{Metadata: m}, nil
}

func (s *preStitchImageService) BatchGetLatestPreStitchImageMetadata(ctx context.Context, req *metadatav1.BatchGetLatestPreStitchImageMetadataRequest) (*metadatav1.BatchGetLatestPreStitchImageMetadataResponse, error) {
	ms, err := s.h.batchLatest(ctx, req.GetCameraIds(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	return &metadatav1.BatchGetLatestPreStitchImageMetadataResponse{Metadata: ms}, nil
}

func (s *preStitchImageService) ListPreStitchImageMetadata(ctx context.Context, req *metadatav1.ListPreStitchImageMetadataRequest) (*metadatav1.ListPreStitchImageMetadataResponse, error) {
	ms, next, err := s.h.list(ctx, listRequest{
		method:   metadatav1.PreStitchImageMetadataService_ListPreStitchImageMetadata_FullMethodName,
		cameraID: req.GetCameraId(), start: req.GetStartTime(), end: req.GetEndTime(),
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, err
	}
	return &metadatav1.ListPreStitchImageMetadataResponse{Metadata: ms, NextPageToken: next}, nil
}

func (s *preStitchImageService) ListPreStitchImageMetadataByCorrelation(ctx context.Context, req *metadatav1.ListPreStitchImageMetadataByCorrelationRequest) (*metadatav1.ListPreStitchImageMetadataByCorrelationResponse, error) {
	ms, next, err := s.h.list(ctx, listRequest{
		method:   metadatav1.PreStitchImageMetadataService_ListPreStitchImageMetadataByCorrelation_FullMethodName,
		cameraID: req.GetCameraId(), filter: images.Filter{CorrelationID: req.GetPanoImageCorrelationId()},
		requireCorrelation: true, pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, err
	}
	return &metadatav1.ListPreStitchImageMetadataByCorrelationResponse{Metadata: ms, NextPageToken: next}, nil
}
