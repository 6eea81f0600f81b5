package server

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
)

// singleImageService serves metadata.v1.SingleImageMetadataService.
type singleImageService struct {
	metadatav1.UnimplementedSingleImageMetadataServiceServer
	h *imageHandler[*metadatav1.SingleImageMetadata]
}

func singleImageFromImage(img images.Image) *metadatav1.SingleImageMetadata {
	return &metadatav1.SingleImageMetadata{
		CameraId:    img.CameraID,
		CapturedAt:  timestamppb.New(img.CapturedAt),
		BlobUri:     img.BlobURI,
		ContentType: img.ContentType,
		SizeBytes:   img.SizeBytes,
		Width:       img.Width,
		Height:      img.Height,
		Attributes:  img.Attributes,
		RowKey:      img.RowKey,
	}
}

func (s *singleImageService) CreateSingleImageMetadata(ctx context.Context, req *metadatav1.CreateSingleImageMetadataRequest) (*metadatav1.CreateSingleImageMetadataResponse, error) {
	m, err := s.h.create(ctx, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	return &metadatav1.CreateSingleImageMetadataResponse{Metadata: m}, nil
}

func (s *singleImageService) BatchCreateSingleImageMetadata(ctx context.Context, req *metadatav1.BatchCreateSingleImageMetadataRequest) (*metadatav1.BatchCreateSingleImageMetadataResponse, error) {
	created, err := s.h.batchCreate(ctx, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	results := make([]*metadatav1.BatchCreateSingleImageMetadataResult, len(created))
	for i, c := range created {
		results[i] = &metadatav1.BatchCreateSingleImageMetadataResult{Metadata: c.metadata, AlreadyExisted: c.existed, Status: c.status}
	}
	return &metadatav1.BatchCreateSingleImageMetadataResponse{Results: results}, nil
}

func (s *singleImageService) GetLatestSingleImageMetadata(ctx context.Context, req *metadatav1.GetLatestSingleImageMetadataRequest) (*metadatav1.GetLatestSingleImageMetadataResponse, error) {
	m, err := s.h.latest(ctx, req.GetCameraId(), images.Filter{})
	if err != nil {
		return nil, err
	}
	return &metadatav1.GetLatestSingleImageMetadataResponse{Metadata: m}, nil
}

func (s *singleImageService) BatchGetLatestSingleImageMetadata(ctx context.Context, req *metadatav1.BatchGetLatestSingleImageMetadataRequest) (*metadatav1.BatchGetLatestSingleImageMetadataResponse, error) {
	ms, err := s.h.batchLatest(ctx, req.GetCameraIds(), req.GetStartTime(), req.GetEndTime())
	if err != nil {
		return nil, err
	}
	return &metadatav1.BatchGetLatestSingleImageMetadataResponse{Metadata: ms}, nil
}

func (s *singleImageService) ListSingleImageMetadata(ctx context.Context, req *metadatav1.ListSingleImageMetadataRequest) (*metadatav1.ListSingleImageMetadataResponse, error) {
	ms, next, err := s.h.list(ctx, listRequest{
		method:   metadatav1.SingleImageMetadataService_ListSingleImageMetadata_FullMethodName,
		cameraID: req.GetCameraId(), start: req.GetStartTime(), end: req.GetEndTime(),
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, err
	}
	return &metadatav1.ListSingleImageMetadataResponse{Metadata: ms, NextPageToken: next}, nil
}
