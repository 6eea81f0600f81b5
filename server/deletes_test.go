package server_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// TestDeleteImageOverGRPC: DeleteImage deletes one image, after which the
// camera's latest is the one before and the instant takes a new image; a
// second delete is NOT_FOUND, a held camera's FAILED_PRECONDITION.
func TestDeleteImageOverGRPC(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachServer(t, func(t *testing.T, h *harness) {
		ctx := t.Context()
		seedMinutes(t, h, 2)
		del := &metadatav1.DeleteImageRequest{ImageType: metadatav1.ImageType_IMAGE_TYPE_SINGLE, CameraId: "cam-0", CapturedAt: timestamp(minute(3))}
		_, err := h.retention.DeleteImage(ctx, del)
		requireOK(t, err, "DeleteImage")
		latest, err := h.single.GetLatestSingleImageMetadata(ctx, &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-0"})
		requireOK(t, err, "GetLatest")
		if got := latest.GetMetadata().GetCapturedAt().AsTime(); !got.Equal(minute(2)) {
			t.Errorf("latest after the delete captured at %v, want %v", got, minute(2))
		}
		_, err = h.retention.DeleteImage(ctx, del)
		requireCode(t, err, codes.NotFound)
		_, err = h.single.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-0", CapturedAt: timestamp(minute(3)), BlobUri: "blob://right"}})
		requireOK(t, err, "create at the freed instant")

		_, err = h.retention.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-1"}})
		requireOK(t, err, "CreateLegalHold")
		_, err = h.retention.DeleteImage(ctx, &metadatav1.DeleteImageRequest{ImageType: metadatav1.ImageType_IMAGE_TYPE_PANO, CameraId: "cam-1", CapturedAt: timestamp(minute(3))})
		requireCode(t, err, codes.FailedPrecondition)
		_, err = h.retention.DeleteCameraImages(ctx, &metadatav1.DeleteCameraImagesRequest{CameraId: "cam-1"})
		requireCode(t, err, codes.FailedPrecondition)
		if got := singleCount(t, h, "cam-1"); got != 4 {
			t.Errorf("the held camera has %d single images, want 4", got)
		}
	})
}

// TestDeleteCameraImagesOverGRPC: a dry run counts a camera's images and
// deletes nothing; the delete itself is a purge job watched to its end,
// naming the camera, that takes every image of it and none of another.
func TestDeleteCameraImagesOverGRPC(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachServer(t, func(t *testing.T, h *harness) {
		ctx := t.Context()
		seedMinutes(t, h, 2)
		for _, dry := range []bool{true, false} {
			started, err := h.retention.DeleteCameraImages(ctx, &metadatav1.DeleteCameraImagesRequest{CameraId: "cam-0", DryRun: dry})
			requireOK(t, err, "DeleteCameraImages")
			snaps := watch(t, h, started.GetJob().GetJobId())
			last := snaps[len(snaps)-1]
			if last.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || last.GetCameraId() != "cam-0" || last.GetDryRun() != dry ||
				last.GetMetadataRowsDeleted() != 3*4 || last.GetIndexRowsDeleted() != 3*4 || last.GetDevicesDone() != 3 {
				t.Fatalf("camera delete (dry run %t) ended %v", dry, last)
			}
			want := 0
			if dry {
				want = 4
			}
			if got := singleCount(t, h, "cam-0"); got != want {
				t.Errorf("after the camera delete (dry run %t) cam-0 has %d single images, want %d", dry, got, want)
			}
			if got := singleCount(t, h, "cam-1"); got != 4 {
				t.Errorf("after cam-0's delete cam-1 has %d single images, want 4", got)
			}
		}
	})
}

// TestDeletesRefuseBadInput: bad requests are INVALID_ARGUMENT naming the
// field, and write nothing.
func TestDeletesRefuseBadInput(t *testing.T) {
	h := startServer(t, openMemPebble(t))
	seedMinutes(t, h, 1)
	before := h.snapshot(t)
	at := timestamp(minute(1))
	single := metadatav1.ImageType_IMAGE_TYPE_SINGLE
	for _, tc := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"image without type", func() error {
			_, err := h.retention.DeleteImage(t.Context(), &metadatav1.DeleteImageRequest{CameraId: "cam-0", CapturedAt: at})
			return err
		}, "image_type"},
		{"image without camera", func() error {
			_, err := h.retention.DeleteImage(t.Context(), &metadatav1.DeleteImageRequest{ImageType: single, CapturedAt: at})
			return err
		}, "camera_id"},
		{"image with a bad camera id", func() error {
			_, err := h.retention.DeleteImage(t.Context(), &metadatav1.DeleteImageRequest{ImageType: single, CameraId: "a/b", CapturedAt: at})
			return err
		}, "camera_id"},
		{"image without capture", func() error {
			_, err := h.retention.DeleteImage(t.Context(), &metadatav1.DeleteImageRequest{ImageType: single, CameraId: "cam-0"})
			return err
		}, "captured_at"},
		{"camera without id", func() error {
			_, err := h.retention.DeleteCameraImages(t.Context(), &metadatav1.DeleteCameraImagesRequest{})
			return err
		}, "camera_id"},
		{"camera with an unknown type", func() error {
			_, err := h.retention.DeleteCameraImages(t.Context(), &metadatav1.DeleteCameraImagesRequest{CameraId: "cam-0",
				ImageTypes: []metadatav1.ImageType{99}})
			return err
		}, "image_types[0]"},
		{"camera with a negative rate", func() error {
			_, err := h.retention.DeleteCameraImages(t.Context(), &metadatav1.DeleteCameraImagesRequest{CameraId: "cam-0", RowsPerSecond: -1})
			return err
		}, "rows_per_second"},
	} {
		t.Run(tc.name, func(t *testing.T) { requireFieldViolation(t, tc.call(), tc.field) })
	}
	h.requireUnchanged(t, before)
	list, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{})
	requireOK(t, err, "ListPurges")
	if len(list.GetJobs()) != 0 {
		t.Errorf("bad requests started %d jobs", len(list.GetJobs()))
	}
}
