package server

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
)

// panoImageService serves metadata.v1.PanoImageMetadataService.
type panoImageService struct {
	metadatav1.UnimplementedPanoImageMetadataServiceServer
	h *imageHandler[*metadatav1.PanoImageMetadata]
}

func panoImageFromImage(img images.Image) *metadatav1.PanoImageMetadata {
	return &metadatav1.PanoImageMetadata{
		CameraId:    img.CameraID,
		CapturedAt:  timestamppb.New(img.CapturedAt),
		BlobUri:     img.BlobURI,
		ContentType: img.ContentType,
		SizeBytes:   img.SizeBytes,
		Width:       img.Width,
		Height:      img.Height,
		Attributes:  img.Attributes,
		IsClearDay:  img.IsClearDay,
		RowKey:      img.RowKey,
	}
}

func (s *panoImageService) CreatePanoImageMetadata(ctx context.Context, req *metadatav1.CreatePanoImageMetadataRequest) (*metadatav1.CreatePanoImageMetadataResponse, error) {
	m, err := s.h.create(ctx, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	return &metadatav1.CreatePanoImageMetadataResponse{Metadata: m}, nil
}

func (s *panoImageService) BatchCreatePanoImageMetadata(ctx context.Context, req *metadatav1.BatchCreatePanoImageMetadataRequest) (*metadatav1.BatchCreatePanoImageMetadataResponse, error) {
	created, err := s.h.batchCreate(ctx, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	results := make([]*metadatav1.BatchCreatePanoImageMetadataResult, len(created))
	for i, c := range created {
		results[i] = &metadatav1.BatchCreatePanoImageMetadataResult{Metadata: c.metadata, AlreadyExisted: c.existed, Status: c.status}
	}
	return &metadatav1.BatchCreatePanoImageMetadataResponse{Results: results}, nil
}

func (s *panoImageService) GetLatestPanoImageMetadata(ctx context.Context, req *metadatav1.GetLatestPanoImageMetadataRequest) (*metadatav1.GetLatestPanoImageMetadataResponse, error) {
	m, err := s.h.latest(ctx, req.GetCameraId(), images.Filter{})
	if err != nil {
		return nil, err
	}
	return &metadatav1.GetLatestPanoImageMetadataResponse{Metadata: m}, nil
}

func (s *panoImageService) BatchGetLatestPanoImageMetadata(ctx context.Context, req *metadatav1.BatchGetLatestPanoImageMetadataRequest) (*metadatav1.BatchGetLatestPanoImageMetadataResponse, error) {
	ms, err := s.h.batchLatest(ctx, req.GetCameraIds(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	return &metadatav1.BatchGetLatestPanoImageMetadataResponse{Metadata: ms}, nil
}

func (s *panoImageService) ListPanoImageMetadata(ctx context.Context, req *metadatav1.ListPanoImageMetadataRequest) (*metadatav1.ListPanoImageMetadataResponse, error) {
	ms, next, err := s.h.list(ctx, listRequest{
		method:   metadatav1.PanoImageMetadataService_ListPanoImageMetadata_FullMethodName,
		cameraID: req.GetCameraId(), start: req.GetStartTime(), end: req.GetEndTime(),
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, err
	}
	return &metadatav1.ListPanoImageMetadataResponse{Metadata: ms, NextPageToken: next}, nil
}

func (s *panoImageService) GetLatestClearDayPanoImageMetadata(ctx context.Context, req *metadatav1.GetLatestClearDayPanoImageMetadataRequest) (*metadatav1.GetLatestClearDayPanoImageMetadataResponse, error) {
	m, err := s.h.latest(ctx, req.GetCameraId(), images.Filter{ClearDayOnly: true})
	if err != nil {
		return nil, err
	}
	return &metadatav1.GetLatestClearDayPanoImageMetadataResponse{Metadata: m}, nil
}
