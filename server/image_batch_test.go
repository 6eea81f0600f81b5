package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// batchResult is one result of a BatchCreate call of any kind.
type batchResult struct {
	img     image
	existed bool
	status  *status.Status
}

// batchCreate calls the BatchCreate RPC of c's kind.
func batchCreate(ctx context.Context, c kindClient, imgs []image) ([]batchResult, error) {
	var out []batchResult
	add := func(m image, existed bool, st *spb.Status) {
		out = append(out, batchResult{img: m, existed: existed, status: status.FromProto(st)})
	}
	switch c := c.(type) {
	case singleClient:
		req := &metadatav1.BatchCreateSingleImageMetadataRequest{}
		for _, img := range imgs {
			req.Metadata = append(req.Metadata, toSingle(img))
		}
		resp, err := c.c.BatchCreateSingleImageMetadata(ctx, req)
		for _, r := range resp.GetResults() {
			add(fromSingle(r.GetMetadata()), r.GetAlreadyExisted(), r.GetStatus())
		}
		return out, err
	case panoClient:
		req := &metadatav1.BatchCreatePanoImageMetadataRequest{}
		for _, img := range imgs {
			req.Metadata = append(req.Metadata, toPano(img))
		}
		resp, err := c.c.BatchCreatePanoImageMetadata(ctx, req)
		for _, r := range resp.GetResults() {
			add(fromPano(r.GetMetadata()), r.GetAlreadyExisted(), r.GetStatus())
		}
		return out, err
	case preStitchClient:
		req := &metadatav1.BatchCreatePreStitchImageMetadataRequest{}
		for _, img := range imgs {
			req.Metadata = append(req.Metadata, toPreStitch(img))
		}
		resp, err := c.c.BatchCreatePreStitchImageMetadata(ctx, req)
		for _, r := range resp.GetResults() {
			add(fromPreStitch(r.GetMetadata()), r.GetAlreadyExisted(), r.GetStatus())
		}
		return out, err
	}
	panic(fmt.Sprintf("no BatchCreate for %T", c))
}

// TestBatchCreateResultPerImage: one call with new images of several
// cameras, retries, conflicts and invalid images gets one result per image,
// in order; invalid images name their own fields; what the call stored
// reads back through the kind's reads; nothing else was written.
func TestBatchCreateResultPerImage(t *testing.T) {
	forEachKindOn(t, writePaths(), func(t *testing.T, h *harness, k kind, c kindClient) {
		existing := mustCreate(t, c, sample("cam-1", minute(1)))
		conflicting := sample("cam-1", minute(1))
		conflicting.BlobURI = "https://blobs.example/other.jpg"
		negative := sample("cam-2", minute(4))
		negative.Width = -1
		huge := sample("cam-2", minute(5))
		huge.Attributes = map[string]string{"a": strings.Repeat("x", 70_000)}
		imgs := []image{
			sample("cam-1", minute(2)),            // 0 created
			sample("cam-2", minute(2)),            // 1 created
			sample("cam-1", minute(1)),            // 2 existed
			conflicting,                           // 3 ALREADY_EXISTS
			{CameraID: "", CapturedAt: minute(3)}, // 4 camera_id required
			negative,                              // 5 width
			huge,                                  // 6 attributes over the limit
			sample("cam-2", minute(2)),            // 7 a copy of 1: existed
			{CameraID: "cam-3"},                   // 8 captured_at required
			sample("cam-3", minute(9)),            // 9 created
		}
		imgs[0].IsClearDay, imgs[0].CorrelationID = true, "pano-2"
		results, err := batchCreate(t.Context(), c, imgs)
		requireOK(t, err, "batch create")
		if len(results) != len(imgs) {
			t.Fatalf("%d results for %d images", len(results), len(imgs))
		}
		for _, i := range []int{0, 1, 2, 7, 9} {
			r := results[i]
			if r.status.Code() != codes.OK || r.existed != (i == 2 || i == 7) {
				t.Errorf("image %d: %v, existed %v", i, r.status.Err(), r.existed)
				continue
			}
			requireImage(t, r.img, stored(k, imgs[i]))
		}
		requireCode(t, results[3].status.Err(), codes.AlreadyExists)
		requireFieldViolation(t, results[4].status.Err(), "metadata[4].camera_id")
		requireFieldViolation(t, results[5].status.Err(), "metadata[5].width")
		requireFieldViolation(t, results[6].status.Err(), "metadata[6].attributes")
		requireFieldViolation(t, results[8].status.Err(), "metadata[8].captured_at")

		latest, err := c.getLatest(t.Context(), "cam-1")
		requireOK(t, err, "get latest")
		requireImage(t, latest, stored(k, imgs[0]))
		got, _, err := c.list(t.Context(), listQuery{cameraID: "cam-1"})
		requireOK(t, err, "list")
		requireImages(t, got, []image{stored(k, imgs[0]), existing})
		for camera, want := range map[string]int{"cam-1": 2, "cam-2": 1, "cam-3": 1} {
			got, _, err := c.list(t.Context(), listQuery{cameraID: camera})
			if err != nil || len(got) != want {
				t.Errorf("%s: %d images, %v; want %d", camera, len(got), err, want)
			}
		}
		if n := len(h.rows(t, k.index)); n != 4 {
			t.Errorf("%d index rows, want one per stored image: 4", n)
		}
		switch k.name {
		case "pano":
			resp, err := h.pano.GetLatestClearDayPanoImageMetadata(t.Context(), &metadatav1.GetLatestClearDayPanoImageMetadataRequest{CameraId: "cam-1"})
			requireOK(t, err, "latest clear day")
			requireImage(t, fromPano(resp.GetMetadata()), stored(k, imgs[0]))
		case "pre-stitch":
			resp, err := h.preStitch.ListPreStitchImageMetadataByCorrelation(t.Context(), &metadatav1.ListPreStitchImageMetadataByCorrelationRequest{
				CameraId: "cam-1", PanoImageCorrelationId: "pano-2"})
			requireOK(t, err, "list by correlation")
			requireImages(t, convertAll(resp.GetMetadata(), fromPreStitch), []image{stored(k, imgs[0])})
		}
	})
}

// TestBatchCreateLimits: an empty call and one over 1,000 images are
// INVALID_ARGUMENT as a whole and write nothing; 1,000 images are taken.
func TestBatchCreateLimits(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		before := h.snapshot(t)
		_, err := batchCreate(t.Context(), c, nil)
		requireFieldViolation(t, err, "metadata")
		var imgs []image
		for i := range 1001 {
			imgs = append(imgs, image{CameraID: fmt.Sprintf("cam-%d", i%7), CapturedAt: minute(i)})
		}
		_, err = batchCreate(t.Context(), c, imgs)
		requireFieldViolation(t, err, "metadata")
		h.requireUnchanged(t, before)
		results, err := batchCreate(t.Context(), c, imgs[:1000])
		requireOK(t, err, "batch of 1,000")
		for i, r := range results {
			if r.status.Code() != codes.OK || r.existed {
				t.Fatalf("image %d: %v, existed %v", i, r.status.Err(), r.existed)
			}
		}
		if n := len(h.rows(t, k.table)); n != 1000 {
			t.Fatalf("%d primary rows after a batch of 1,000", n)
		}
	})
}
