package server_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// maxPages bounds every paging loop, so a token that never runs out fails
// instead of looping forever.
const maxPages = 1000

// minutes is the sample images of camera at minutes from down to to, newest first.
func minutes(k kind, camera string, from, to int) []image {
	var out []image
	for m := from; m >= to; m-- {
		out = append(out, stored(k, sample(camera, minute(m))))
	}
	return out
}

// TestListRange checks [start_time, end_time) on one page, to the tick.
func TestListRange(t *testing.T) {
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(base.Add(d)) }
	m := time.Minute
	cases := []struct {
		name       string
		start, end *timestamppb.Timestamp
		// from and to are the newest and oldest minute listed; from < to lists nothing.
		from, to int
	}{
		{name: "no bounds, newest first", from: 9, to: 0},
		{name: "image at start included", start: ts(3 * m), from: 9, to: 3},
		{name: "image at end excluded", end: ts(7 * m), from: 6, to: 0},
		{name: "window", start: ts(3 * m), end: ts(7 * m), from: 6, to: 3},
		{name: "window of one image", start: ts(5 * m), end: ts(6 * m), from: 5, to: 5},
		{name: "start equals end", start: ts(5 * m), end: ts(5 * m), from: -1, to: 0},
		{name: "bounds between images", start: ts(3*m + 30*time.Second), end: ts(5*m + 30*time.Second), from: 5, to: 4},
		{name: "start 1 ns after an image excludes it", start: ts(3*m + 1), from: 9, to: 4},
		{name: "start 1 ns before an image includes it", start: ts(3*m - 1), from: 9, to: 3},
		{name: "end 1 ns after an image includes it", end: ts(7*m + 1), from: 7, to: 0},
		{name: "end 1 ns before an image excludes it", end: ts(7*m - 1), from: 6, to: 0},
		{name: "end 100 ns after an image includes it", end: ts(7*m + 100), from: 7, to: 0},
		{name: "window after every image", start: ts(20 * m), from: -1, to: 0},
		{name: "window before every image", end: ts(0), from: -1, to: 0},
		{name: "widest window", start: timestamppb.New(time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)),
			end: timestamppb.New(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)), from: 9, to: 0},
	}
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		for m := range 10 {
			mustCreate(t, c, sample("cam-1", minute(m)))
		}
		mustCreate(t, c, sample("cam-2", minute(5)))
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, next, err := c.list(t.Context(), listQuery{cameraID: "cam-1", start: tc.start, end: tc.end})
				requireOK(t, err, "list")
				requireImages(t, got, minutes(k, "cam-1", tc.from, tc.to))
				if next != "" {
					t.Errorf("single page has next_page_token %q", next)
				}
			})
		}
	})
}

// TestListExtremeInstants lists images at the first and last instants the
// API accepts, with bounds at those instants.
func TestListExtremeInstants(t *testing.T) {
	first := time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)
	lastAccepted := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	cases := []struct {
		name       string
		start, end time.Time
		want       []time.Time
	}{
		{name: "no bounds", want: []time.Time{last, base, first}},
		{name: "start at the first instant", start: first, want: []time.Time{last, base, first}},
		{name: "start 100 ns after the first instant", start: first.Add(100), want: []time.Time{last, base}},
		{name: "end at the last tick excludes it", end: last, want: []time.Time{base, first}},
		{name: "end at the last accepted instant", end: lastAccepted, want: []time.Time{last, base, first}},
		{name: "start at the last tick", start: last, end: lastAccepted, want: []time.Time{last}},
		{name: "end at the first instant", end: first, want: nil},
	}
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		for _, at := range []time.Time{first, base, last} {
			mustCreate(t, c, sample("cam-1", at))
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got, _, err := c.list(t.Context(), listQuery{cameraID: "cam-1", start: timestamp(tc.start), end: timestamp(tc.end)})
				requireOK(t, err, "list")
				var want []image
				for _, at := range tc.want {
					want = append(want, stored(k, sample("cam-1", at)))
				}
				requireImages(t, got, want)
				batch, err := c.batchGetLatest(t.Context(), []string{"cam-1"}, timestamp(tc.start), timestamp(tc.end))
				requireOK(t, err, "batch get latest")
				requireImages(t, batch, want[:min(len(want), 1)])
			})
		}
	})
}

// TestListPaging pages through 250 images and checks that each is listed
// exactly once, in order, and that only the last page has no token.
func TestListPaging(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	cases := []struct {
		name       string
		start, end *timestamppb.Timestamp
		// sizes are the page sizes of the pages in turn; the last repeats.
		sizes     []int32
		wantPages []int
		from, to  int
	}{
		{name: "page_size 100", sizes: []int32{100}, wantPages: []int{100, 100, 50}, from: 249, to: 0},
		{name: "default page_size is 100", sizes: []int32{0}, wantPages: []int{100, 100, 50}, from: 249, to: 0},
		{name: "page_size 1000", sizes: []int32{1000}, wantPages: []int{250}, from: 249, to: 0},
		{name: "page_size dividing the images", sizes: []int32{125}, wantPages: []int{125, 125}, from: 249, to: 0},
		{name: "page_size of all the images", sizes: []int32{250}, wantPages: []int{250}, from: 249, to: 0},
		{name: "page_size changing between pages", sizes: []int32{1, 99, 0, 1000}, wantPages: []int{1, 99, 100, 50}, from: 249, to: 0},
		// Within a window: 250 pages of one were 250 round trips a kind,
		// most of the test's time on Azurite, for the same paging.
		{name: "page_size 1", start: timestamppb.New(minute(230)), end: timestamppb.New(minute(250)),
			sizes: []int32{1}, wantPages: slices.Repeat([]int{1}, 20), from: 249, to: 230},
		{name: "page_size over the maximum is lowered to it", sizes: []int32{1001}, wantPages: []int{250}, from: 249, to: 0},
		{name: "page_size of the largest int32", sizes: []int32{math.MaxInt32}, wantPages: []int{250}, from: 249, to: 0},
		{name: "within a window", start: timestamppb.New(minute(50)), end: timestamppb.New(minute(200)),
			sizes: []int32{60}, wantPages: []int{60, 60, 30}, from: 199, to: 50},
		{name: "within a window, page_size dividing it", start: timestamppb.New(minute(50)), end: timestamppb.New(minute(200)),
			sizes: []int32{75}, wantPages: []int{75, 75}, from: 199, to: 50},
	}
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		var imgs []image
		for m := range 250 {
			imgs = append(imgs, sample("cam-1", minute(m)))
		}
		mustBatchCreate(t, c, append(imgs, sample("cam-2", minute(100))))
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel() // the cases only read the seeded server
				q := listQuery{cameraID: "cam-1", start: tc.start, end: tc.end}
				var all []image
				var sizes []int
				for page := 0; ; page++ {
					if page == maxPages {
						t.Fatalf("still paging after %d pages", maxPages)
					}
					q.pageSize = tc.sizes[min(page, len(tc.sizes)-1)]
					got, next, err := c.list(t.Context(), q)
					requireOK(t, err, "list page")
					all = append(all, got...)
					sizes = append(sizes, len(got))
					if next == "" {
						break
					}
					q.pageToken = next
				}
				requireImages(t, all, minutes(k, "cam-1", tc.from, tc.to))
				if !slices.Equal(sizes, tc.wantPages) {
					t.Errorf("page sizes %v, want %v", sizes, tc.wantPages)
				}
			})
		}
	})
}

// TestListMostRecent is "the 20 most recent images of a camera": the first
// page of a List with page_size 20.
func TestListMostRecent(t *testing.T) {
	forEachKind(t, func(t *testing.T, h *harness, k kind, c kindClient) {
		for _, m := range []int{3, 24, 0, 17, 9, 12, 1, 22, 5, 19, 8, 14, 2, 23, 11, 6, 20, 4, 15, 10, 21, 7, 18, 13, 16} {
			mustCreate(t, c, sample("cam-1", minute(m)))
		}
		got, next, err := c.list(t.Context(), listQuery{cameraID: "cam-1", pageSize: 20})
		requireOK(t, err, "list")
		requireImages(t, got, minutes(k, "cam-1", 24, 5))
		if next == "" {
			t.Error("first 20 of 25 images came without next_page_token")
		}
	})
}

func TestListPreStitchImageMetadataByCorrelation(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		correlated := map[string][]int{"pano-1": {1, 3, 5, 7, 9}, "pano-2": {2, 4, 6}}
		for id, ms := range correlated {
			for _, m := range ms {
				img := sample("cam-1", minute(m))
				img.CorrelationID = id
				mustCreate(t, preStitchClient{h.preStitch}, img)
			}
		}
		other := sample("cam-2", minute(8))
		other.CorrelationID = "pano-1"
		mustCreate(t, preStitchClient{h.preStitch}, other)

		cases := []struct {
			name, cameraID, correlationID string
			pageSize                      int32
			want                          []int
		}{
			{name: "pages of 2", cameraID: "cam-1", correlationID: "pano-1", pageSize: 2, want: []int{9, 7, 5, 3, 1}},
			{name: "pages of 1", cameraID: "cam-1", correlationID: "pano-1", pageSize: 1, want: []int{9, 7, 5, 3, 1}},
			{name: "default page_size", cameraID: "cam-1", correlationID: "pano-1", want: []int{9, 7, 5, 3, 1}},
			{name: "other correlation id", cameraID: "cam-1", correlationID: "pano-2", pageSize: 2, want: []int{6, 4, 2}},
			{name: "other camera", cameraID: "cam-2", correlationID: "pano-1", want: []int{8}},
			{name: "unknown correlation id", cameraID: "cam-1", correlationID: "pano-3", want: nil},
			{name: "camera without images", cameraID: "cam-3", correlationID: "pano-1", want: nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req := &metadatav1.ListPreStitchImageMetadataByCorrelationRequest{
					CameraId: tc.cameraID, PanoImageCorrelationId: tc.correlationID, PageSize: tc.pageSize}
				all := listByCorrelation(t, h, req)
				var want []image
				for _, m := range tc.want {
					img := sample(tc.cameraID, minute(m))
					img.CorrelationID = tc.correlationID
					want = append(want, stored(kinds[2], img))
				}
				requireImages(t, all, want)
			})
		}
	})
}

// listByCorrelation pages through a correlation listing to its end,
// checking that no page exceeds its size.
func listByCorrelation(t *testing.T, h *harness, req *metadatav1.ListPreStitchImageMetadataByCorrelationRequest) []image {
	t.Helper()
	limit := int(req.GetPageSize())
	if limit == 0 {
		limit = 100
	}
	var all []image
	for range maxPages {
		resp, err := h.preStitch.ListPreStitchImageMetadataByCorrelation(t.Context(), req)
		requireOK(t, err, "list by correlation")
		if len(resp.GetMetadata()) > limit {
			t.Fatalf("page of %d images, page_size %d", len(resp.GetMetadata()), limit)
		}
		all = append(all, convertAll(resp.GetMetadata(), fromPreStitch)...)
		if resp.GetNextPageToken() == "" {
			return all
		}
		req.PageToken = resp.GetNextPageToken()
	}
	t.Fatalf("still paging after %d pages", maxPages)
	return nil
}
