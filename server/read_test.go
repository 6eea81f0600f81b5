package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

func TestGetLatest(t *testing.T) {
	longID := strings.Repeat("x", 256)
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		// Inserted out of order: the newest is created in the middle.
		for _, img := range []image{sample("cam-1", minute(1)), sample("cam-1", minute(3)), sample("cam-1", minute(2)),
			sample("cam-10", minute(5)), sample(longID, minute(4))} {
			mustCreate(t, c, img)
		}
		cases := []struct {
			name     string
			cameraID string
			want     image
			wantCode codes.Code
		}{
			{name: "newest regardless of insert order", cameraID: "cam-1", want: stored(k, sample("cam-1", minute(3)))},
			{name: "camera id of 256 bytes", cameraID: longID, want: stored(k, sample(longID, minute(4)))},
			{name: "camera without images", cameraID: "cam-2", wantCode: codes.NotFound},
			{name: "prefix of another camera's id", cameraID: "cam", wantCode: codes.NotFound},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, err := c.getLatest(t.Context(), tc.cameraID)
				if tc.wantCode != codes.OK {
					requireCode(t, err, tc.wantCode)
					return
				}
				requireOK(t, err, "get latest")
				requireImage(t, got, tc.want)
			})
		}
	})
}

func TestBatchGetLatest(t *testing.T) {
	ts := func(n int) *timestamppb.Timestamp { return timestamppb.New(minute(n)) }
	many := make([]string, 0, 1000)
	for i := range 998 {
		many = append(many, fmt.Sprintf("unknown-%d", i))
	}
	many = append(many, "cam-b", "cam-a")
	cases := []struct {
		name       string
		ids        []string
		start, end *timestamppb.Timestamp
		want       []shot
	}{
		{name: "newest per camera in request order", ids: []string{"cam-c", "cam-b", "cam-a"}, want: []shot{{"cam-b", 6}, {"cam-a", 3}}},
		{name: "other request order", ids: []string{"cam-a", "cam-c", "cam-b"}, want: []shot{{"cam-a", 3}, {"cam-b", 6}}},
		{name: "only cameras without images", ids: []string{"cam-c", "cam-d"}, want: nil},
		{name: "duplicate ids answered once", ids: []string{"cam-a", "cam-a"}, want: []shot{{"cam-a", 3}}},
		{name: "start only", ids: []string{"cam-a", "cam-b"}, start: ts(3), want: []shot{{"cam-a", 3}, {"cam-b", 6}}},
		{name: "end excluded", ids: []string{"cam-a", "cam-b"}, end: ts(3), want: []shot{{"cam-a", 2}}},
		{name: "window", ids: []string{"cam-a", "cam-b"}, start: ts(2), end: ts(6), want: []shot{{"cam-a", 3}, {"cam-b", 5}}},
		{name: "image at start included", ids: []string{"cam-a", "cam-b"}, start: ts(6), end: ts(7), want: []shot{{"cam-b", 6}}},
		{name: "start equals end", ids: []string{"cam-a", "cam-b"}, start: ts(5), end: ts(5), want: nil},
		{name: "window without images", ids: []string{"cam-a", "cam-b"}, start: ts(10), want: nil},
		{name: "1000 ids", ids: many, want: []shot{{"cam-b", 6}, {"cam-a", 3}}},
	}
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		for _, img := range []image{sample("cam-a", minute(2)), sample("cam-a", minute(3)), sample("cam-a", minute(1)),
			sample("cam-b", minute(6)), sample("cam-b", minute(5))} {
			mustCreate(t, c, img)
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, err := c.batchGetLatest(t.Context(), tc.ids, tc.start, tc.end)
				requireOK(t, err, "batch get latest")
				var want []image
				for _, w := range tc.want {
					want = append(want, stored(k, sample(w.camera, minute(w.minute))))
				}
				requireImages(t, got, want)
			})
		}
	})
}

// TestBatchGetLatestReadsConcurrently checks that cameras are read
// concurrently and at most images.DefaultBatchConcurrency at once. The
// first two reads wait for each other, so reading one camera after another
// cannot finish; the deadline only turns that hang into a failure.
func TestBatchGetLatestReadsConcurrently(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var (
			armed                 atomic.Bool
			mu                    sync.Mutex
			inFlight, maxInFlight int
			meet                  sync.Once
		)
		together := make(chan struct{})
		h := startServer(t, hookQuery(b.open(t), func(ctx context.Context, next func() (store.Page, error)) (store.Page, error) {
			if !armed.Load() {
				return next()
			}
			mu.Lock()
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			if inFlight == 2 {
				meet.Do(func() { close(together) })
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				inFlight--
				mu.Unlock()
			}()
			select {
			case <-together:
			case <-ctx.Done():
				return store.Page{}, ctx.Err()
			}
			return next()
		}))
		var ids []string
		for i := range 3 * images.DefaultBatchConcurrency {
			id := fmt.Sprintf("cam-%d", i)
			ids = append(ids, id)
			mustCreate(t, singleClient{h.single}, sample(id, minute(i)))
		}
		armed.Store(true)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		resp, err := h.single.BatchGetLatestSingleImageMetadata(ctx, &metadatav1.BatchGetLatestSingleImageMetadataRequest{CameraIds: ids})
		requireOK(t, err, "batch get latest (DeadlineExceeded means the cameras were read one after another)")
		if len(resp.GetMetadata()) != len(ids) {
			t.Errorf("got %d images, want %d", len(resp.GetMetadata()), len(ids))
		}
		if maxInFlight > images.DefaultBatchConcurrency {
			t.Errorf("%d cameras read at once, want at most %d", maxInFlight, images.DefaultBatchConcurrency)
		}
	})
}

func TestGetLatestClearDayPanoImageMetadata(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		pano := panoClient{h.pano}
		panos := []struct {
			camera string
			minute int
			clear  bool
		}{
			{"cam-1", 1, true}, {"cam-1", 3, true}, {"cam-1", 2, false}, {"cam-1", 4, false}, {"cam-1", 5, false},
			{"cam-2", 1, false}, {"cam-2", 2, false},
		}
		for _, p := range panos {
			img := sample(p.camera, minute(p.minute))
			img.IsClearDay = p.clear
			mustCreate(t, pano, img)
		}
		// A single image of cam-3 is no pano of cam-3.
		mustCreate(t, singleClient{h.single}, sample("cam-3", minute(1)))

		want := sample("cam-1", minute(3))
		want.IsClearDay = true
		cases := []struct {
			name     string
			cameraID string
			want     image
			wantCode codes.Code
		}{
			{name: "newest clear day behind newer cloudy ones", cameraID: "cam-1", want: stored(kinds[1], want)},
			{name: "only cloudy panos", cameraID: "cam-2", wantCode: codes.NotFound},
			{name: "no panos", cameraID: "cam-3", wantCode: codes.NotFound},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := h.pano.GetLatestClearDayPanoImageMetadata(t.Context(),
					&metadatav1.GetLatestClearDayPanoImageMetadataRequest{CameraId: tc.cameraID})
				if tc.wantCode != codes.OK {
					requireCode(t, err, tc.wantCode)
					return
				}
				requireOK(t, err, "get latest clear day")
				requireImage(t, fromPano(resp.GetMetadata()), tc.want)
			})
		}
		latest, err := pano.getLatest(t.Context(), "cam-1")
		requireOK(t, err, "get latest")
		if !latest.CapturedAt.Equal(minute(5)) || latest.IsClearDay {
			t.Errorf("latest pano %v, want the cloudy one at minute 5", latest)
		}
	})
}

// TestKindsAreIsolated checks that an image of one kind is invisible
// through the services of the others.
func TestKindsAreIsolated(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		for i, k := range kinds {
			mustCreate(t, k.client(h), sample(k.name+"-cam", minute(i)))
		}
		for _, reader := range kinds {
			for _, writer := range kinds {
				if reader.name == writer.name {
					continue
				}
				t.Run(writer.name+" through "+reader.name, func(t *testing.T) {
					c, cam := reader.client(h), writer.name+"-cam"
					_, err := c.getLatest(t.Context(), cam)
					requireCode(t, err, codes.NotFound)
					got, err := c.batchGetLatest(t.Context(), []string{cam}, nil, nil)
					requireOK(t, err, "batch get latest")
					requireImages(t, got, nil)
					got, next, err := c.list(t.Context(), listQuery{cameraID: cam})
					requireOK(t, err, "list")
					requireImages(t, got, nil)
					if next != "" {
						t.Errorf("empty list has next_page_token %q", next)
					}
				})
			}
		}
		resp, err := h.preStitch.ListPreStitchImageMetadataByCorrelation(t.Context(),
			&metadatav1.ListPreStitchImageMetadataByCorrelationRequest{CameraId: "single-cam", PanoImageCorrelationId: "x"})
		requireOK(t, err, "list by correlation")
		if len(resp.GetMetadata()) != 0 {
			t.Errorf("single image listed as pre-stitch: %v", resp.GetMetadata())
		}
		_, err = h.pano.GetLatestClearDayPanoImageMetadata(t.Context(),
			&metadatav1.GetLatestClearDayPanoImageMetadataRequest{CameraId: "single-cam"})
		requireCode(t, err, codes.NotFound)
	})
}
