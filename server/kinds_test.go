package server_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// image is what the three image messages carry, so one test body drives
// all three services. A zero CapturedAt is sent as a missing captured_at.
type image struct {
	CameraID      string
	CapturedAt    time.Time
	BlobURI       string
	ContentType   string
	SizeBytes     int64
	Width, Height int32
	Attributes    map[string]string
	// IsClearDay travels through the pano service only.
	IsClearDay bool
	// CorrelationID travels through the pre-stitch service only.
	CorrelationID string
	RowKey        string
}

// equal compares two images field by field: instants with Equal, attributes
// as maps (nil and empty alike).
func (a image) equal(b image) bool {
	return a.CameraID == b.CameraID && a.CapturedAt.Equal(b.CapturedAt) && a.BlobURI == b.BlobURI &&
		a.ContentType == b.ContentType && a.SizeBytes == b.SizeBytes && a.Width == b.Width && a.Height == b.Height &&
		maps.Equal(a.Attributes, b.Attributes) && a.IsClearDay == b.IsClearDay && a.CorrelationID == b.CorrelationID &&
		a.RowKey == b.RowKey
}

func (a image) String() string {
	return fmt.Sprintf("{%s %s %s %q %q %d %dx%d %v clear=%t corr=%q}", a.CameraID, a.CapturedAt.Format(time.RFC3339Nano),
		a.RowKey, a.BlobURI, a.ContentType, a.SizeBytes, a.Width, a.Height, a.Attributes, a.IsClearDay, a.CorrelationID)
}

// listQuery is a List request of any kind.
type listQuery struct {
	cameraID   string
	start, end *timestamppb.Timestamp
	pageSize   int32
	pageToken  string
}

// kindClient calls the RPCs the three services share, for one kind.
type kindClient interface {
	create(ctx context.Context, img image) (image, error)
	// createWithoutMetadata sends a create request whose metadata is unset.
	createWithoutMetadata(ctx context.Context) error
	getLatest(ctx context.Context, cameraID string) (image, error)
	batchGetLatest(ctx context.Context, cameraIDs []string, start, end *timestamppb.Timestamp) ([]image, error)
	list(ctx context.Context, q listQuery) ([]image, string, error)
}

// kind is one image kind as the API and the tables name it.
type kind struct {
	name string
	// table and index are the names of the kind's primary and index tables.
	table, index string
	client       func(h *harness) kindClient
	// forKind drops the fields the kind's message does not carry.
	forKind func(img image) image
}

var kinds = []kind{
	{
		name: "single", table: "SingleImageMetadata", index: "SingleImageMetadataIndex",
		client: func(h *harness) kindClient { return singleClient{h.single} },
		forKind: func(img image) image {
			img.IsClearDay, img.CorrelationID = false, ""
			return img
		},
	},
	{
		name: "pano", table: "PanoImageMetadata", index: "PanoImageMetadataIndex",
		client: func(h *harness) kindClient { return panoClient{h.pano} },
		forKind: func(img image) image {
			img.CorrelationID = ""
			return img
		},
	},
	{
		name: "pre-stitch", table: "PreStitchImageMetadata", index: "PreStitchImageMetadataIndex",
		client: func(h *harness) kindClient { return preStitchClient{h.preStitch} },
		forKind: func(img image) image {
			img.IsClearDay = false
			return img
		},
	},
}

// forEachKind runs test once per image kind against a fresh server per
// backend.
func forEachKind(t *testing.T, test func(t *testing.T, h *harness, k kind, c kindClient)) {
	t.Helper()
	forEachKindOn(t, backends, test)
}

// forEachKindOn is forEachKind on the given backends.
func forEachKindOn(t *testing.T, bs []backend, test func(t *testing.T, h *harness, k kind, c kindClient)) {
	t.Helper()
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			for _, k := range kinds {
				t.Run(k.name, func(t *testing.T) {
					h := startServer(t, b.open(t))
					test(t, h, k, k.client(h))
				})
			}
		})
	}
}

// writePaths are the backends and each again without its store.Transactor,
// so creates are checked both as one atomic batch and as the ordered
// writes of a backend without transactions.
func writePaths() []backend {
	out := slices.Clone(backends)
	for _, b := range backends {
		out = append(out, backend{name: b.name + " without transactions", open: func(t *testing.T) store.Backend {
			return plainBackend{b.open(t)}
		}})
	}
	return out
}

// plainBackend hides every method of its backend but store.Backend's.
type plainBackend struct {
	store.Backend
}

// base is the instant the tests' images are captured around.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// minute is n minutes after base.
func minute(n int) time.Time { return base.Add(time.Duration(n) * time.Minute) }

// sample is an image of camera captured at at, with a blob URI unique to both.
func sample(cameraID string, at time.Time) image {
	return image{
		CameraID: cameraID, CapturedAt: at,
		BlobURI:     "https://blobs.example/" + cameraID + "/" + at.Format("20060102T150405.0000000") + ".jpg",
		ContentType: "image/jpeg", SizeBytes: 345678, Width: 1920, Height: 1080,
		Attributes: map[string]string{"exposure": "1/250"},
	}
}

// shot names the sample image of a camera at a minute.
type shot struct {
	camera string
	minute int
}

// stored is img as the service stores and returns it for kind k, for
// instants that are whole ticks.
func stored(k kind, img image) image {
	img = k.forKind(img)
	img.RowKey = store.InvertedTicksRowKey(img.CapturedAt)
	return img
}

// mustCreate creates img and returns it as stored.
func mustCreate(t *testing.T, c kindClient, img image) image {
	t.Helper()
	got, err := c.create(t.Context(), img)
	requireOK(t, err, "create "+img.String())
	return got
}

// mustBatchCreate stores imgs in BatchCreate calls and fails unless each
// is created anew: a fixture of many images in a few calls rather than a
// Create call each.
func mustBatchCreate(t *testing.T, c kindClient, imgs []image) {
	t.Helper()
	for chunk := range slices.Chunk(imgs, images.MaxBatchCreate) {
		results, err := batchCreate(t.Context(), c, chunk)
		requireOK(t, err, "batch create")
		if len(results) != len(chunk) {
			t.Fatalf("%d results for a batch of %d", len(results), len(chunk))
		}
		for i, r := range results {
			if r.status.Code() != codes.OK || r.existed {
				t.Fatalf("batch create %v: %v, existed %v", chunk[i], r.status.Err(), r.existed)
			}
		}
	}
}

// requireImages fails unless got holds want, in order.
func requireImages(t *testing.T, got, want []image) {
	t.Helper()
	if !slices.EqualFunc(got, want, image.equal) {
		t.Fatalf("got %d images:\n%v\nwant %d:\n%v", len(got), got, len(want), want)
	}
}

// requireImage fails unless got equals want.
func requireImage(t *testing.T, got, want image) {
	t.Helper()
	if !got.equal(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func convertAll[M any](ms []M, from func(M) image) []image {
	out := make([]image, len(ms))
	for i, m := range ms {
		out[i] = from(m)
	}
	return out
}

type singleClient struct {
	c metadatav1.SingleImageMetadataServiceClient
}

func toSingle(img image) *metadatav1.SingleImageMetadata {
	return &metadatav1.SingleImageMetadata{
		CameraId: img.CameraID, CapturedAt: timestamp(img.CapturedAt), BlobUri: img.BlobURI, ContentType: img.ContentType,
		SizeBytes: img.SizeBytes, Width: img.Width, Height: img.Height, Attributes: img.Attributes, RowKey: img.RowKey,
	}
}

func fromSingle(m *metadatav1.SingleImageMetadata) image {
	return image{
		CameraID: m.GetCameraId(), CapturedAt: timeOf(m.GetCapturedAt()), BlobURI: m.GetBlobUri(), ContentType: m.GetContentType(),
		SizeBytes: m.GetSizeBytes(), Width: m.GetWidth(), Height: m.GetHeight(), Attributes: m.GetAttributes(), RowKey: m.GetRowKey(),
	}
}

func (s singleClient) create(ctx context.Context, img image) (image, error) {
	resp, err := s.c.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{Metadata: toSingle(img)})
	return fromSingle(resp.GetMetadata()), err
}

func (s singleClient) createWithoutMetadata(ctx context.Context) error {
	_, err := s.c.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{})
	return err
}

func (s singleClient) getLatest(ctx context.Context, cameraID string) (image, error) {
	resp, err := s.c.GetLatestSingleImageMetadata(ctx, &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: cameraID})
	return fromSingle(resp.GetMetadata()), err
}

func (s singleClient) batchGetLatest(ctx context.Context, cameraIDs []string, start, end *timestamppb.Timestamp) ([]image, error) {
	resp, err := s.c.BatchGetLatestSingleImageMetadata(ctx, &metadatav1.BatchGetLatestSingleImageMetadataRequest{
		CameraIds: cameraIDs, StartTime: start, EndTime: end})
	return convertAll(resp.GetMetadata(), fromSingle), err
}

func (s singleClient) list(ctx context.Context, q listQuery) ([]image, string, error) {
	resp, err := s.c.ListSingleImageMetadata(ctx, &metadatav1.ListSingleImageMetadataRequest{
		CameraId: q.cameraID, StartTime: q.start, EndTime: q.end, PageSize: q.pageSize, PageToken: q.pageToken})
	return convertAll(resp.GetMetadata(), fromSingle), resp.GetNextPageToken(), err
}

type panoClient struct {
	c metadatav1.PanoImageMetadataServiceClient
}

func toPano(img image) *metadatav1.PanoImageMetadata {
	return &metadatav1.PanoImageMetadata{
		CameraId: img.CameraID, CapturedAt: timestamp(img.CapturedAt), BlobUri: img.BlobURI, ContentType: img.ContentType,
		SizeBytes: img.SizeBytes, Width: img.Width, Height: img.Height, Attributes: img.Attributes, RowKey: img.RowKey,
		IsClearDay: img.IsClearDay,
	}
}

func fromPano(m *metadatav1.PanoImageMetadata) image {
	return image{
		CameraID: m.GetCameraId(), CapturedAt: timeOf(m.GetCapturedAt()), BlobURI: m.GetBlobUri(), ContentType: m.GetContentType(),
		SizeBytes: m.GetSizeBytes(), Width: m.GetWidth(), Height: m.GetHeight(), Attributes: m.GetAttributes(), RowKey: m.GetRowKey(),
		IsClearDay: m.GetIsClearDay(),
	}
}

func (p panoClient) create(ctx context.Context, img image) (image, error) {
	resp, err := p.c.CreatePanoImageMetadata(ctx, &metadatav1.CreatePanoImageMetadataRequest{Metadata: toPano(img)})
	return fromPano(resp.GetMetadata()), err
}

func (p panoClient) createWithoutMetadata(ctx context.Context) error {
	_, err := p.c.CreatePanoImageMetadata(ctx, &metadatav1.CreatePanoImageMetadataRequest{})
	return err
}

func (p panoClient) getLatest(ctx context.Context, cameraID string) (image, error) {
	resp, err := p.c.GetLatestPanoImageMetadata(ctx, &metadatav1.GetLatestPanoImageMetadataRequest{CameraId: cameraID})
	return fromPano(resp.GetMetadata()), err
}

func (p panoClient) batchGetLatest(ctx context.Context, cameraIDs []string, start, end *timestamppb.Timestamp) ([]image, error) {
	resp, err := p.c.BatchGetLatestPanoImageMetadata(ctx, &metadatav1.BatchGetLatestPanoImageMetadataRequest{
		CameraIds: cameraIDs, StartTime: start, EndTime: end})
	return convertAll(resp.GetMetadata(), fromPano), err
}

func (p panoClient) list(ctx context.Context, q listQuery) ([]image, string, error) {
	resp, err := p.c.ListPanoImageMetadata(ctx, &metadatav1.ListPanoImageMetadataRequest{
		CameraId: q.cameraID, StartTime: q.start, EndTime: q.end, PageSize: q.pageSize, PageToken: q.pageToken})
	return convertAll(resp.GetMetadata(), fromPano), resp.GetNextPageToken(), err
}

type preStitchClient struct {
	c metadatav1.PreStitchImageMetadataServiceClient
}

func toPreStitch(img image) *metadatav1.PreStitchImageMetadata {
	return &metadatav1.PreStitchImageMetadata{
		CameraId: img.CameraID, CapturedAt: timestamp(img.CapturedAt), BlobUri: img.BlobURI, ContentType: img.ContentType,
		SizeBytes: img.SizeBytes, Width: img.Width, Height: img.Height, Attributes: img.Attributes, RowKey: img.RowKey,
		PanoImageCorrelationId: img.CorrelationID,
	}
}

func fromPreStitch(m *metadatav1.PreStitchImageMetadata) image {
	return image{
		CameraID: m.GetCameraId(), CapturedAt: timeOf(m.GetCapturedAt()), BlobURI: m.GetBlobUri(), ContentType: m.GetContentType(),
		SizeBytes: m.GetSizeBytes(), Width: m.GetWidth(), Height: m.GetHeight(), Attributes: m.GetAttributes(), RowKey: m.GetRowKey(),
		CorrelationID: m.GetPanoImageCorrelationId(),
	}
}

func (p preStitchClient) create(ctx context.Context, img image) (image, error) {
	resp, err := p.c.CreatePreStitchImageMetadata(ctx, &metadatav1.CreatePreStitchImageMetadataRequest{Metadata: toPreStitch(img)})
	return fromPreStitch(resp.GetMetadata()), err
}

func (p preStitchClient) createWithoutMetadata(ctx context.Context) error {
	_, err := p.c.CreatePreStitchImageMetadata(ctx, &metadatav1.CreatePreStitchImageMetadataRequest{})
	return err
}

func (p preStitchClient) getLatest(ctx context.Context, cameraID string) (image, error) {
	resp, err := p.c.GetLatestPreStitchImageMetadata(ctx, &metadatav1.GetLatestPreStitchImageMetadataRequest{CameraId: cameraID})
	return fromPreStitch(resp.GetMetadata()), err
}

func (p preStitchClient) batchGetLatest(ctx context.Context, cameraIDs []string, start, end *timestamppb.Timestamp) ([]image, error) {
	resp, err := p.c.BatchGetLatestPreStitchImageMetadata(ctx, &metadatav1.BatchGetLatestPreStitchImageMetadataRequest{
		CameraIds: cameraIDs, StartTime: start, EndTime: end})
	return convertAll(resp.GetMetadata(), fromPreStitch), err
}

func (p preStitchClient) list(ctx context.Context, q listQuery) ([]image, string, error) {
	resp, err := p.c.ListPreStitchImageMetadata(ctx, &metadatav1.ListPreStitchImageMetadataRequest{
		CameraId: q.cameraID, StartTime: q.start, EndTime: q.end, PageSize: q.pageSize, PageToken: q.pageToken})
	return convertAll(resp.GetMetadata(), fromPreStitch), resp.GetNextPageToken(), err
}
