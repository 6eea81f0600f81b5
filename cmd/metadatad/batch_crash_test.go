package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
)

// batchCreate sends imgs, all of one kind, as one BatchCreate call and
// returns those whose result acknowledges them.
func (c imageClients) batchCreate(ctx context.Context, kind images.Kind, imgs []written) ([]written, error) {
	var codes []int32
	switch kind {
	case images.Single:
		req := &metadatav1.BatchCreateSingleImageMetadataRequest{}
		for _, w := range imgs {
			req.Metadata = append(req.Metadata, &metadatav1.SingleImageMetadata{CameraId: w.camera, CapturedAt: timestamppb.New(w.at), BlobUri: "b"})
		}
		resp, err := c.single.BatchCreateSingleImageMetadata(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, r := range resp.GetResults() {
			codes = append(codes, r.GetStatus().GetCode())
		}
	case images.Pano:
		req := &metadatav1.BatchCreatePanoImageMetadataRequest{}
		for _, w := range imgs {
			req.Metadata = append(req.Metadata, &metadatav1.PanoImageMetadata{CameraId: w.camera, CapturedAt: timestamppb.New(w.at), BlobUri: "b", IsClearDay: true})
		}
		resp, err := c.pano.BatchCreatePanoImageMetadata(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, r := range resp.GetResults() {
			codes = append(codes, r.GetStatus().GetCode())
		}
	case images.PreStitch:
		req := &metadatav1.BatchCreatePreStitchImageMetadataRequest{}
		for _, w := range imgs {
			req.Metadata = append(req.Metadata, &metadatav1.PreStitchImageMetadata{CameraId: w.camera, CapturedAt: timestamppb.New(w.at), BlobUri: "b",
				PanoImageCorrelationId: correlationAt(w.at)})
		}
		resp, err := c.preStitch.BatchCreatePreStitchImageMetadata(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, r := range resp.GetResults() {
			codes = append(codes, r.GetStatus().GetCode())
		}
	}
	var acked []written
	for i, code := range codes {
		if code == 0 {
			acked = append(acked, imgs[i])
		}
	}
	return acked, nil
}

// correlationAt is the correlation id of the pre-stitch images of a minute.
func correlationAt(at time.Time) string {
	return "pano-" + at.Truncate(time.Minute).Format("200601021504")
}

// TestAcknowledgedBatchesSurviveCrash kills the daemon without warning
// while 4 writers upload batches of 200 images of 5 cameras each: every
// image a batch acknowledged is readable after the restart, by its camera
// and through the pointer reads (latest clear day, by correlation), and
// the primary and index tables hold exactly the same images (on Azure,
// every primary row has its index row).
func TestAcknowledgedBatchesSurviveCrash(t *testing.T) {
	for _, s := range crashStores(t) {
		t.Run(s.name, func(t *testing.T) { acknowledgedBatchesSurviveCrash(t, s) })
	}
}

func acknowledgedBatchesSurviveCrash(t *testing.T, s crashStore) {
	const writers, batch, cycles = 4, 200, 3
	var mu sync.Mutex
	var acked []written
	next := make([]int, writers)
	killWhileWriting(t, s, cycles, writers, 300*time.Millisecond, func(ctx context.Context, clients imageClients, w int) bool {
		kind := images.Kinds[next[w]%len(images.Kinds)]
		var imgs []written
		for range batch {
			seq := next[w]
			next[w]++
			imgs = append(imgs, written{kind: kind, camera: fmt.Sprintf("batch-w%d-c%d", w, seq%5),
				at: crashBase.Add(time.Duration(seq) * 7 * time.Second)})
		}
		got, err := clients.batchCreate(ctx, kind, imgs)
		if err != nil {
			return false // the daemon is gone; this batch's outcome is unknown
		}
		mu.Lock()
		acked = append(acked, got...)
		mu.Unlock()
		return true
	}, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d images", len(acked))
	})

	d := s.start(t)
	clients := newImageClients(d.conn(t))
	byPartition := map[written][]time.Time{}
	for _, img := range acked {
		key := written{kind: img.kind, camera: img.camera}
		byPartition[key] = append(byPartition[key], img.at)
	}
	for key, want := range byPartition {
		got := clients.captured(t, key.kind, key.camera)
		for _, at := range want {
			if !slices.ContainsFunc(got, at.Equal) {
				t.Fatalf("acknowledged %s image of %s at %v lost", key.kind, key.camera, at)
			}
		}
		switch key.kind {
		case images.Pano:
			resp, err := clients.pano.GetLatestClearDayPanoImageMetadata(t.Context(), &metadatav1.GetLatestClearDayPanoImageMetadataRequest{CameraId: key.camera})
			if err != nil || resp.GetMetadata().GetCapturedAt().AsTime().Before(slices.MaxFunc(want, time.Time.Compare)) {
				t.Fatalf("latest clear day of %s: %v, %v; want at least the newest acknowledged", key.camera, resp.GetMetadata().GetCapturedAt(), err)
			}
		case images.PreStitch:
			at := want[len(want)-1]
			resp, err := clients.preStitch.ListPreStitchImageMetadataByCorrelation(t.Context(), &metadatav1.ListPreStitchImageMetadataByCorrelationRequest{
				CameraId: key.camera, PanoImageCorrelationId: correlationAt(at), PageSize: 1000})
			if err != nil || !slices.ContainsFunc(resp.GetMetadata(), func(m *metadatav1.PreStitchImageMetadata) bool { return m.GetCapturedAt().AsTime().Equal(at) }) {
				t.Fatalf("%s by correlation %s: %d images, %v; want the acknowledged one at %v", key.camera, correlationAt(at), len(resp.GetMetadata()), err, at)
			}
		}
	}
	stop(t, d)
	s.requireIndexMatchesPrimary(t, time.Time{})
}
