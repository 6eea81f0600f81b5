package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/watchfeed"
)

// imageMessage is what the three image metadata messages have in common;
// their generated getters satisfy it, so one handler serves all three.
type imageMessage interface {
	proto.Message
	GetCameraId() string
	GetCapturedAt() *timestamppb.Timestamp
	GetBlobUri() string
	GetContentType() string
	GetSizeBytes() int64
	GetWidth() int32
	GetHeight() int32
	GetAttributes() map[string]string
}

// imageFields names the request field behind each stored property, so a
// store limit error points at the field the client sent.
var imageFields = map[string]string{
	images.PropCameraID:      "camera_id",
	images.PropCapturedAt:    "captured_at",
	images.PropBlobURI:       "blob_uri",
	images.PropContentType:   "content_type",
	images.PropAttributes:    "attributes",
	images.PropCorrelationID: "pano_image_correlation_id",
}

// imageHandler is the shared implementation of the image services; each
// service file adapts it to its generated interface.
type imageHandler[M imageMessage] struct {
	repo *images.Repository
	log  *slog.Logger
	// feed streams the kind's new images to Watch calls; creates publish to it.
	feed *watchfeed.Feed
	// stopping is closed when the server shuts down: watches end then.
	stopping <-chan struct{}
	// fromImage builds the kind's message from a stored image.
	fromImage func(images.Image) M
}

// toImage reads the fields the kind's message carries into an image.
func toImage(m imageMessage) images.Image {
	img := images.Image{
		CameraID:    m.GetCameraId(),
		BlobURI:     m.GetBlobUri(),
		ContentType: m.GetContentType(),
		SizeBytes:   m.GetSizeBytes(),
		Width:       m.GetWidth(),
		Height:      m.GetHeight(),
		Attributes:  m.GetAttributes(),
	}
	if pano, ok := m.(interface{ GetIsClearDay() bool }); ok {
		img.IsClearDay = pano.GetIsClearDay()
	}
	if pre, ok := m.(interface{ GetPanoImageCorrelationId() string }); ok {
		img.PanoImageCorrelationID = pre.GetPanoImageCorrelationId()
	}
	return img
}

func (h *imageHandler[M]) create(ctx context.Context, m M) (M, error) {
	var zero M
	img, err := checkImage(m, "metadata")
	if err != nil {
		return zero, err
	}
	stored, err := h.repo.Create(ctx, img)
	if err != nil {
		return zero, h.createError(ctx, img, err, "metadata")
	}
	h.feed.Publish(stored)
	return h.fromImage(stored), nil
}

// checkImage checks the image in request field message and reads it.
func checkImage(m imageMessage, message string) (images.Image, error) {
	var v violations
	if !m.ProtoReflect().IsValid() {
		v.add(message, "required")
		return images.Image{}, v.err()
	}
	img := toImage(m)
	img.CapturedAt = v.checkRecordingIn(message, img.CameraID, m.GetCapturedAt(), img.SizeBytes)
	if img.Width < 0 {
		v.add(message+".width", "must not be negative")
	}
	if img.Height < 0 {
		v.add(message+".height", "must not be negative")
	}
	return img, v.err()
}

// createError is the status of a failed create of img, sent in request
// field message.
func (h *imageHandler[M]) createError(ctx context.Context, img images.Image, err error, message string) error {
	return errorWords{
		messages: map[error]string{store.ErrAlreadyExists: fmt.Sprintf("camera %q already has a different %s image captured at %s",
			img.CameraID, h.repo.Kind(), img.CapturedAt.Format(time.RFC3339Nano))},
		entity: message, fields: imageFields, resource: map[string]string{"camera_id": img.CameraID},
	}.status(ctx, h.log, err)
}

func (h *imageHandler[M]) latest(ctx context.Context, cameraID string, filter images.Filter) (M, error) {
	var zero M
	var v violations
	v.checkCameraID("camera_id", cameraID)
	if err := v.err(); err != nil {
		return zero, err
	}
	img, err := h.repo.Latest(ctx, cameraID, images.Span{}, filter)
	if err != nil {
		return zero, errorWords{messages: map[error]string{
			store.ErrNotFound: fmt.Sprintf("camera %q has no matching %s image", cameraID, h.repo.Kind()),
		}, resource: map[string]string{"camera_id": cameraID}}.status(ctx, h.log, err)
	}
	return h.fromImage(img), nil
}

func (h *imageHandler[M]) batchLatest(ctx context.Context, cameraIDs []string, start, end *timestamppb.Timestamp) ([]M, error) {
	var v violations
	v.checkCameraIDs("camera_ids", cameraIDs)
	span := v.checkSpan(start, end)
	if err := v.err(); err != nil {
		return nil, err
	}
	imgs, err := h.repo.BatchLatest(ctx, cameraIDs, span)
	if err != nil {
		return nil, toStatus(ctx, h.log, err)
	}
	return h.fromImages(imgs), nil
}

// listRequest is one page request of one camera's images or recordings.
type listRequest struct {
	method     string
	cameraID   string
	start, end *timestamppb.Timestamp
	filter     images.Filter
	// requireCorrelation makes filter.CorrelationID a required field.
	requireCorrelation bool
	pageSize           int32
	pageToken          string
}

// cameraPage is a checked page request of one camera's rows.
type cameraPage struct {
	span   images.Span
	limit  int
	resume *store.Cursor
	// fingerprint ties the page's next_page_token to its query.
	fingerprint string
}

// checkCameraPage checks a page request of one camera's rows.
func checkCameraPage(req listRequest) (cameraPage, error) {
	var v violations
	v.checkCameraID("camera_id", req.cameraID)
	if req.requireCorrelation && req.filter.CorrelationID == "" {
		v.add("pano_image_correlation_id", "required")
	}
	p := cameraPage{span: v.checkSpan(req.start, req.end), limit: v.checkPageSize(req.pageSize)}
	p.fingerprint = queryFingerprint(req.method, req.cameraID, formatTime(req.start), formatTime(req.end), req.filter.CorrelationID)
	p.resume = v.checkPageToken(req.pageToken, p.fingerprint)
	if p.resume != nil && p.resume.PartitionKey != req.cameraID {
		v.add("page_token", "belongs to another query")
	}
	return p, v.err()
}

func (h *imageHandler[M]) list(ctx context.Context, req listRequest) ([]M, string, error) {
	p, err := checkCameraPage(req)
	if err != nil {
		return nil, "", err
	}
	imgs, next, err := h.repo.List(ctx, images.ListOptions{
		CameraID: req.cameraID, Span: p.span, Filter: req.filter, Limit: p.limit, Resume: p.resume,
	})
	if err != nil {
		return nil, "", toStatus(ctx, h.log, err)
	}
	msgs, token := listPage(p.fingerprint, imgs, next, h.fromImage)
	return msgs, token, nil
}

func (h *imageHandler[M]) fromImages(imgs []images.Image) []M {
	out := make([]M, len(imgs))
	for i, img := range imgs {
		out[i] = h.fromImage(img)
	}
	return out
}

func formatTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().Format(time.RFC3339Nano)
}
