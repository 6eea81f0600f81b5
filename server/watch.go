package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/watchfeed"
)

// WatchOptions configure the image services' Watch RPCs.
type WatchOptions struct {
	// Poll, when positive, finds the new images of watched cameras by
	// reading the store at this interval (see package watchfeed), for a store
	// that several replicas write (Azure); 0
	// feeds the creates this server makes, for a store one process owns
	// (the embedded store).
	Poll time.Duration
	// Window is how far from the moment an image becomes readable its
	// captured_at may lie to be streamed; 0 means watchfeed.DefaultWindow.
	Window time.Duration
	// Buffer is how many new images wait for a stream's client before the
	// stream is ended as fallen behind; 0 means watchfeed.DefaultBuffer.
	Buffer int
	// MaxResumeAge is how old a resume token a Watch accepts; 0 means
	// watchfeed.DefaultMaxResumeAge. A resume reads the watched cameras' images
	// from the token's point on.
	MaxResumeAge time.Duration
	// Now is the feeds' clock; nil means time.Now.
	Now func() time.Time
}

// watchEndedReason is the google.rpc.ErrorInfo reason of a Watch stream the
// server ended; its metadata resumeTokenKey is where to resume.
const (
	watchEndedReason = "WATCH_ENDED"
	resumeTokenKey   = "resume_token"
)

// resumeTokenPrefix versions the resume token: a Stamp in Unix nanoseconds.
const resumeTokenPrefix = "w1:"

func encodeResumeToken(stamp time.Time) string {
	return base64.RawURLEncoding.EncodeToString([]byte(resumeTokenPrefix + strconv.FormatInt(stamp.UnixNano(), 10)))
}

func decodeResumeToken(token string) (time.Time, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !strings.HasPrefix(string(raw), resumeTokenPrefix) {
		return time.Time{}, false
	}
	nanos, err := strconv.ParseInt(strings.TrimPrefix(string(raw), resumeTokenPrefix), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, nanos).UTC(), true
}

// watchRequest is the part every Watch request shares.
type watchRequest struct {
	cameraIDs       []string
	startWithLatest bool
	resumeToken     string
}

// checkCameraIDs validates a list of 1 to maxBatchCameras camera ids.
func (v *violations) checkCameraIDs(field string, ids []string) {
	switch {
	case len(ids) == 0:
		v.add(field, "required")
	case len(ids) > maxBatchCameras:
		v.add(field, fmt.Sprintf("at most %d ids, got %d", maxBatchCameras, len(ids)))
	default:
		for i, id := range ids {
			v.checkCameraID(fmt.Sprintf("%s[%d]", field, i), id)
		}
	}
}

// watcher is one Watch stream: what it sent of each camera and where a new
// watch would resume.
type watcher[M imageMessage] struct {
	h    *imageHandler[M]
	send func(m M, token string, existing bool) error
	// newest is the row key of the last image sent of each camera; row keys
	// are inverted ticks, so a newer image has a smaller one.
	newest map[string]string
	// token resumes after the last image sent.
	token string
}

// deliver sends img unless its camera already had one as new or newer.
// Either way the stream has handled img: a new watch from token misses
// nothing that came after it.
func (w *watcher[M]) deliver(img images.Image, token string, existing bool) error {
	if last, ok := w.newest[img.CameraID]; ok && img.RowKey >= last {
		w.token = token
		return nil
	}
	if err := w.send(w.h.fromImage(img), token, existing); err != nil {
		return err
	}
	w.newest[img.CameraID] = img.RowKey
	w.token = token
	return nil
}

// ended is the status of a stream the server ends, with where to resume.
func (w *watcher[M]) ended(code codes.Code, message string) error {
	return errorInfoStatus(status.New(code, message), watchEndedReason, map[string]string{resumeTokenKey: w.token}).Err()
}

// watch serves a Watch RPC: the catch-up (resume or latest), then the new
// images until the client leaves, the stream falls behind or the server
// stops.
func (h *imageHandler[M]) watch(ctx context.Context, req watchRequest, send func(m M, token string, existing bool) error) error {
	resume, err := h.checkWatch(req)
	if err != nil {
		return err
	}
	cameras := make(map[string]bool, len(req.cameraIDs))
	var unique []string
	for _, id := range req.cameraIDs {
		if !cameras[id] {
			cameras[id] = true
			unique = append(unique, id)
		}
	}
	// The catch-up reads the store and may take a while: a shutdown cuts it
	// short like the client leaving does.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	w := &watcher[M]{h: h, send: send, newest: make(map[string]string, len(unique))}
	stopped := func(err error) error {
		select {
		case <-h.stopping:
			return w.ended(codes.Unavailable, "server shutting down; watch again with the resume token")
		default:
		}
		if ctx.Err() != nil {
			return toStatus(ctx, h.log, ctx.Err())
		}
		if _, ok := status.FromError(err); ok {
			return err
		}
		return toStatus(ctx, h.log, err)
	}
	sub, err := h.feed.Subscribe(ctx, unique)
	if err != nil {
		return stopped(err)
	}
	defer sub.Close()
	w.token = encodeResumeToken(sub.Start())
	switch {
	case resume != nil:
		w.token = encodeResumeToken(*resume)
		err = h.feed.Since(ctx, cameras, *resume, func(img images.Image) error { return w.deliver(img, w.token, false) })
	case req.startWithLatest:
		var latest []images.Image
		if latest, err = h.repo.BatchLatest(ctx, unique, images.Span{}); err == nil {
			for _, img := range latest {
				if err = w.deliver(img, w.token, true); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		return stopped(err)
	}
	for {
		select {
		case ev := <-sub.Events():
			if err := w.deliver(ev.Image, encodeResumeToken(ev.Stamp), false); err != nil {
				return stopped(err)
			}
		case <-sub.Behind():
			return w.ended(codes.ResourceExhausted, fmt.Sprintf(
				"the stream fell behind: %d new images waited for the client; watch again with the resume token", h.feed.Buffer()))
		case <-ctx.Done():
			return stopped(ctx.Err())
		}
	}
}

// checkWatch validates a watch request: its camera ids, and its resume
// token, which it returns as the instant to resume from (nil: none).
func (h *imageHandler[M]) checkWatch(req watchRequest) (*time.Time, error) {
	var v violations
	v.checkCameraIDs("camera_ids", req.cameraIDs)
	if req.resumeToken == "" {
		return nil, v.err()
	}
	stamp, ok := decodeResumeToken(req.resumeToken)
	now := h.feed.Now()
	switch {
	case !ok:
		v.add("resume_token", "malformed")
	case stamp.Before(now.Add(-h.feed.MaxResumeAge())):
		v.add("resume_token", fmt.Sprintf("older than %s: read the gap with List and watch anew", h.feed.MaxResumeAge()))
	case stamp.After(now.Add(watchfeed.ClockSkew)):
		v.add("resume_token", "from the future")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return &stamp, nil
}

func (s *singleImageService) WatchSingleImageMetadata(req *metadatav1.WatchSingleImageMetadataRequest, stream grpc.ServerStreamingServer[metadatav1.WatchSingleImageMetadataResponse]) error {
	return s.h.watch(stream.Context(), watchRequest{req.GetCameraIds(), req.GetStartWithLatest(), req.GetResumeToken()},
		func(m *metadatav1.SingleImageMetadata, token string, existing bool) error {
			return stream.Send(&metadatav1.WatchSingleImageMetadataResponse{Metadata: m, ResumeToken: token, Existing: existing})
		})
}

func (s *panoImageService) WatchPanoImageMetadata(req *metadatav1.WatchPanoImageMetadataRequest, stream grpc.ServerStreamingServer[metadatav1.WatchPanoImageMetadataResponse]) error {
	return s.h.watch(stream.Context(), watchRequest{req.GetCameraIds(), req.GetStartWithLatest(), req.GetResumeToken()},
		func(m *metadatav1.PanoImageMetadata, token string, existing bool) error {
			return stream.Send(&metadatav1.WatchPanoImageMetadataResponse{Metadata: m, ResumeToken: token, Existing: existing})
		})
}

func (s *preStitchImageService) WatchPreStitchImageMetadata(req *metadatav1.WatchPreStitchImageMetadataRequest, stream grpc.ServerStreamingServer[metadatav1.WatchPreStitchImageMetadataResponse]) error {
	return s.h.watch(stream.Context(), watchRequest{req.GetCameraIds(), req.GetStartWithLatest(), req.GetResumeToken()},
		func(m *metadatav1.PreStitchImageMetadata, token string, existing bool) error {
			return stream.Send(&metadatav1.WatchPreStitchImageMetadataResponse{Metadata: m, ResumeToken: token, Existing: existing})
		})
}
