package server_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
)

// recording is a sample recording of camera starting at at, with a blob
// URI unique to both.
func recording(camera string, at time.Time) *metadatav1.VideoMetadata {
	return &metadatav1.VideoMetadata{
		CameraId: camera, CapturedAt: timestamppb.New(at), Duration: durationpb.New(90 * time.Second),
		BlobUri:     "https://blobs.example/" + camera + "/" + at.Format("20060102T150405.0000000") + ".mp4",
		ContentType: "video/mp4", SizeBytes: 12_345_678, Attributes: map[string]string{"codec": "h264"},
	}
}

// storedRecording is m as the service returns it, for instants and
// durations that are whole ticks.
func storedRecording(m *metadatav1.VideoMetadata) *metadatav1.VideoMetadata {
	m = proto.Clone(m).(*metadatav1.VideoMetadata)
	m.RowKey = store.InvertedTicksRowKey(m.GetCapturedAt().AsTime())
	return m
}

func mustCreateRecording(t *testing.T, h *harness, m *metadatav1.VideoMetadata) *metadatav1.VideoMetadata {
	t.Helper()
	resp, err := h.video.CreateVideoMetadata(t.Context(), &metadatav1.CreateVideoMetadataRequest{Metadata: m})
	requireOK(t, err, "create recording "+prototext.Format(m))
	return resp.GetMetadata()
}

// requireMessages fails unless got holds want, in order.
func requireMessages[M proto.Message](t *testing.T, got, want []M) {
	t.Helper()
	equal := len(got) == len(want)
	for i := 0; equal && i < len(got); i++ {
		equal = proto.Equal(got[i], want[i])
	}
	if !equal {
		t.Fatalf("got %d messages:\n%v\nwant %d:\n%v", len(got), got, len(want), want)
	}
}

func TestCreateVideoMetadata(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		cases := []struct {
			name string
			in   *metadatav1.VideoMetadata
			want *metadatav1.VideoMetadata
		}{
			{name: "every field", in: recording("cam-1", minute(1)), want: storedRecording(recording("cam-1", minute(1)))},
			{name: "only the required fields", in: &metadatav1.VideoMetadata{CameraId: "cam-1", CapturedAt: timestamppb.New(minute(2))},
				want: &metadatav1.VideoMetadata{CameraId: "cam-1", CapturedAt: timestamppb.New(minute(2)), Duration: durationpb.New(0),
					RowKey: store.InvertedTicksRowKey(minute(2))}},
			{name: "instants and durations truncated to ticks", in: func() *metadatav1.VideoMetadata {
				m := recording("cam-2", minute(1).Add(123))
				m.Duration = durationpb.New(time.Minute + 199)
				m.RowKey = "ignored"
				return m
			}(), want: func() *metadatav1.VideoMetadata {
				m := storedRecording(recording("cam-2", minute(1).Add(100)))
				m.BlobUri = recording("cam-2", minute(1).Add(123)).GetBlobUri()
				m.Duration = durationpb.New(time.Minute + 100)
				return m
			}()},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got := mustCreateRecording(t, h, tc.in)
				if !proto.Equal(got, tc.want) {
					t.Fatalf("created %v\nwant    %v", got, tc.want)
				}
			})
		}
		t.Run("one row per recording, keyed by camera and inverted ticks", func(t *testing.T) {
			rows := h.rows(t, "VideoMetadata")
			want := []string{
				"cam-1/" + store.InvertedTicksRowKey(minute(2)), "cam-1/" + store.InvertedTicksRowKey(minute(1)),
				"cam-2/" + store.InvertedTicksRowKey(minute(1).Add(100)),
			}
			if got := rowKeys(rows); got != "["+strings.Join(want, " ")+"]" {
				t.Fatalf("rows %s, want %v", got, want)
			}
			if p := rows[1].Properties; p["CameraId"] != "cam-1" || p["DurationTicks"] != int64(900_000_000) || p["ContentType"] != "video/mp4" {
				t.Errorf("row properties %v", p)
			}
			for _, name := range tableNames() {
				if name != "VideoMetadata" && len(h.rows(t, name)) != 0 {
					t.Errorf("video creates wrote to table %s", name)
				}
			}
		})
	})
}

func TestCreateVideoMetadataIsIdempotent(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		first := mustCreateRecording(t, h, recording("cam-1", minute(1)))
		again := mustCreateRecording(t, h, recording("cam-1", minute(1)))
		if !proto.Equal(first, again) {
			t.Fatalf("identical retry returned %v, first create %v", again, first)
		}
		before := h.snapshot(t)
		for _, tc := range []struct {
			name   string
			change func(m *metadatav1.VideoMetadata)
		}{
			{"other duration", func(m *metadatav1.VideoMetadata) { m.Duration = durationpb.New(time.Second) }},
			{"other blob", func(m *metadatav1.VideoMetadata) { m.BlobUri = "https://blobs.example/other.mp4" }},
			{"other attributes", func(m *metadatav1.VideoMetadata) { m.Attributes = nil }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m := recording("cam-1", minute(1))
				tc.change(m)
				_, err := h.video.CreateVideoMetadata(t.Context(), &metadatav1.CreateVideoMetadataRequest{Metadata: m})
				requireCode(t, err, codes.AlreadyExists)
				h.requireUnchanged(t, before)
			})
		}
	})
}

func TestGetLatestVideoMetadata(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		for _, s := range []shot{{"cam-1", 2}, {"cam-1", 5}, {"cam-1", 3}, {"cam-2", 9}} {
			mustCreateRecording(t, h, recording(s.camera, minute(s.minute)))
		}
		for _, tc := range []struct {
			name, camera string
			want         *metadatav1.VideoMetadata
		}{
			{"newest of several, created out of order", "cam-1", storedRecording(recording("cam-1", minute(5)))},
			{"only one", "cam-2", storedRecording(recording("cam-2", minute(9)))},
			{"camera without recordings", "cam-3", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := h.video.GetLatestVideoMetadata(t.Context(), &metadatav1.GetLatestVideoMetadataRequest{CameraId: tc.camera})
				if tc.want == nil {
					requireCode(t, err, codes.NotFound)
					return
				}
				requireOK(t, err, "get latest")
				if !proto.Equal(resp.GetMetadata(), tc.want) {
					t.Fatalf("latest %v\nwant   %v", resp.GetMetadata(), tc.want)
				}
			})
		}
	})
}

// recordings is the sample recordings of camera at minutes from down to
// to, newest first, as stored.
func recordings(camera string, from, to int) []*metadatav1.VideoMetadata {
	var out []*metadatav1.VideoMetadata
	for m := from; m >= to; m-- {
		out = append(out, storedRecording(recording(camera, minute(m))))
	}
	return out
}

// TestListVideoMetadataRange checks [start_time, end_time), newest first.
func TestListVideoMetadataRange(t *testing.T) {
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(base.Add(d)) }
	m := time.Minute
	cases := []struct {
		name       string
		start, end *timestamppb.Timestamp
		// from and to are the newest and oldest minute listed; from < to lists nothing.
		from, to int
	}{
		{name: "no bounds, newest first", from: 9, to: 0},
		{name: "recording at start included", start: ts(3 * m), from: 9, to: 3},
		{name: "recording at end excluded", end: ts(7 * m), from: 6, to: 0},
		{name: "window", start: ts(3 * m), end: ts(7 * m), from: 6, to: 3},
		{name: "start equals end", start: ts(5 * m), end: ts(5 * m), from: -1, to: 0},
		{name: "start 1 ns after a recording excludes it", start: ts(3*m + 1), from: 9, to: 4},
		{name: "end 1 ns after a recording includes it", end: ts(7*m + 1), from: 7, to: 0},
		{name: "window after every recording", start: ts(20 * m), from: -1, to: 0},
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		for i := range 10 {
			mustCreateRecording(t, h, recording("cam-1", minute(i)))
		}
		mustCreateRecording(t, h, recording("cam-2", minute(5)))
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := h.video.ListVideoMetadata(t.Context(), &metadatav1.ListVideoMetadataRequest{
					CameraId: "cam-1", StartTime: tc.start, EndTime: tc.end})
				requireOK(t, err, "list")
				requireMessages(t, resp.GetMetadata(), recordings("cam-1", tc.from, tc.to))
				if resp.GetNextPageToken() != "" {
					t.Errorf("single page has next_page_token %q", resp.GetNextPageToken())
				}
			})
		}
	})
}

// TestListVideoMetadataPaging pages through a window and checks that each
// recording is listed once, in order, and only the last page has no token.
func TestListVideoMetadataPaging(t *testing.T) {
	cases := []struct {
		name      string
		pageSize  int32
		wantPages int
	}{
		{name: "pages of 1", pageSize: 1, wantPages: 20},
		{name: "pages of 7", pageSize: 7, wantPages: 3},
		{name: "one page exactly", pageSize: 20, wantPages: 1},
		{name: "default page size", pageSize: 0, wantPages: 1},
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		for i := range 25 {
			mustCreateRecording(t, h, recording("cam-1", minute(i)))
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req := &metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", StartTime: timestamppb.New(minute(3)),
					EndTime: timestamppb.New(minute(23)), PageSize: tc.pageSize}
				var got []*metadatav1.VideoMetadata
				pages := 0
				for ; pages < maxPages; pages++ {
					resp, err := h.video.ListVideoMetadata(t.Context(), req)
					requireOK(t, err, fmt.Sprintf("page %d", pages))
					got = append(got, resp.GetMetadata()...)
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
					if len(resp.GetMetadata()) != int(tc.pageSize) {
						t.Fatalf("page %d holds %d recordings, want a full page of %d", pages, len(resp.GetMetadata()), tc.pageSize)
					}
				}
				requireMessages(t, got, recordings("cam-1", 22, 3))
				if pages+1 != tc.wantPages {
					t.Errorf("%d pages, want %d", pages+1, tc.wantPages)
				}
			})
		}
	})
}

// badCall is one bad request, expected to be refused naming field.
type badCall struct {
	name, field string
	call        func(t *testing.T, h *harness) error
}

// requireRefusedUnchanged runs every case against h: each must get
// INVALID_ARGUMENT naming its field and leave every table as it was.
func requireRefusedUnchanged(t *testing.T, h *harness, cases []badCall) {
	t.Helper()
	before := h.snapshot(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireFieldViolation(t, tc.call(t, h), tc.field)
			h.requireUnchanged(t, before)
		})
	}
}

// TestVideoBadInput checks that every bad request gets INVALID_ARGUMENT
// naming the field, and writes nothing.
func TestVideoBadInput(t *testing.T) {
	create := func(change func(m *metadatav1.VideoMetadata)) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			m := recording("cam-3", minute(1))
			change(m)
			_, err := h.video.CreateVideoMetadata(t.Context(), &metadatav1.CreateVideoMetadataRequest{Metadata: m})
			return err
		}
	}
	list := func(req *metadatav1.ListVideoMetadataRequest) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			_, err := h.video.ListVideoMetadata(t.Context(), req)
			return err
		}
	}
	// listWithTokenOf lists cam-1 with the first page token of another query.
	listWithTokenOf := func(other func(t *testing.T, h *harness) string) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			_, err := h.video.ListVideoMetadata(t.Context(), &metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", PageToken: other(t, h)})
			return err
		}
	}
	videoToken := func(req *metadatav1.ListVideoMetadataRequest) func(t *testing.T, h *harness) string {
		return func(t *testing.T, h *harness) string {
			req.PageSize = 1
			resp, err := h.video.ListVideoMetadata(t.Context(), req)
			requireOK(t, err, "list first page")
			if resp.GetNextPageToken() == "" {
				t.Fatalf("no next_page_token listing %v", req)
			}
			return resp.GetNextPageToken()
		}
	}
	over64KiB := strings.Repeat("u", 32769) // 65,538 bytes as UTF-16
	cases := []badCall{
		{"create without metadata", "metadata", func(t *testing.T, h *harness) error {
			_, err := h.video.CreateVideoMetadata(t.Context(), &metadatav1.CreateVideoMetadataRequest{})
			return err
		}},
		{"create without captured_at", "metadata.captured_at", create(func(m *metadatav1.VideoMetadata) { m.CapturedAt = nil })},
		{"create captured_at before 1601-01-01", "metadata.captured_at",
			create(func(m *metadatav1.VideoMetadata) {
				m.CapturedAt = timestamppb.New(time.Date(1600, 12, 31, 0, 0, 0, 0, time.UTC))
			})},
		{"create captured_at not a valid timestamp", "metadata.captured_at",
			create(func(m *metadatav1.VideoMetadata) { m.CapturedAt.Nanos = -1 })},
		{"create negative duration", "metadata.duration", create(func(m *metadatav1.VideoMetadata) { m.Duration = durationpb.New(-time.Second) })},
		{"create duration not a valid duration", "metadata.duration",
			create(func(m *metadatav1.VideoMetadata) { m.Duration = &durationpb.Duration{Seconds: 1, Nanos: -1} })},
		{"create duration longer than 292 years", "metadata.duration",
			create(func(m *metadatav1.VideoMetadata) { m.Duration = &durationpb.Duration{Seconds: 10_000_000_000} })},
		{"create negative size_bytes", "metadata.size_bytes", create(func(m *metadatav1.VideoMetadata) { m.SizeBytes = -1 })},
		{"create blob_uri over 64 KiB as UTF-16", "metadata.blob_uri", create(func(m *metadatav1.VideoMetadata) { m.BlobUri = over64KiB })},
		{"create content_type over 64 KiB as UTF-16", "metadata.content_type", create(func(m *metadatav1.VideoMetadata) { m.ContentType = over64KiB })},
		{"create attributes over 64 KiB as UTF-16", "metadata.attributes",
			create(func(m *metadatav1.VideoMetadata) { m.Attributes = map[string]string{"k": over64KiB} })},
		{"list start_time after end_time", "start_time",
			list(&metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", StartTime: timestamppb.New(minute(3)), EndTime: timestamppb.New(minute(2))})},
		{"list end_time after 9999-12-31", "end_time",
			list(&metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", EndTime: timestamppb.New(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))})},
		{"list page_size -1", "page_size", list(&metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", PageSize: -1})},
		{"list page_token not base64", "page_token", list(&metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", PageToken: "%%%"})},
		{"list page_token base64 of garbage", "page_token",
			list(&metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", PageToken: base64.RawURLEncoding.EncodeToString([]byte("garbage\xff"))})},
		{"list page_token of another camera", "page_token", listWithTokenOf(videoToken(&metadatav1.ListVideoMetadataRequest{CameraId: "cam-2"}))},
		{"list page_token of another window", "page_token",
			listWithTokenOf(videoToken(&metadatav1.ListVideoMetadataRequest{CameraId: "cam-1", StartTime: timestamppb.New(minute(0))}))},
		{"list page_token of the single image listing", "page_token", listWithTokenOf(func(t *testing.T, h *harness) string {
			return firstPageToken(t, singleClient{h.single}, listQuery{cameraID: "cam-1"})
		})},
	}
	for name, id := range invalidCameraIDs() {
		cases = append(cases,
			badCall{"create camera_id " + name, "metadata.camera_id", create(func(m *metadatav1.VideoMetadata) { m.CameraId = id })},
			badCall{"get latest camera_id " + name, "camera_id", func(t *testing.T, h *harness) error {
				_, err := h.video.GetLatestVideoMetadata(t.Context(), &metadatav1.GetLatestVideoMetadataRequest{CameraId: id})
				return err
			}},
			badCall{"list camera_id " + name, "camera_id", list(&metadatav1.ListVideoMetadataRequest{CameraId: id})},
		)
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		for _, s := range []shot{{"cam-1", 1}, {"cam-1", 2}, {"cam-2", 1}, {"cam-2", 2}} {
			mustCreateRecording(t, h, recording(s.camera, minute(s.minute)))
			mustCreate(t, singleClient{h.single}, sample(s.camera, minute(s.minute)))
		}
		requireRefusedUnchanged(t, h, cases)
	})
}
