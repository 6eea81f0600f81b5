package server

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// Request limits of the API.
const (
	maxCameraIDBytes = 256
	defaultPageSize  = 100
	maxPageSize      = 1000
	maxBatchCameras  = 1000
	// maxMessageBytes bounds an error's message, however many violations
	// it lists; the details list each one.
	maxMessageBytes = 1000
)

// Capture times span what both .NET DateTimeOffset ticks and Azure's
// Edm.DateTime hold.
var (
	minTime = time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// violations collects the field violations of one request, so a client sees
// every problem at once.
type violations struct {
	list []*errdetails.BadRequest_FieldViolation
}

func (v *violations) add(field, description string) {
	v.list = append(v.list, &errdetails.BadRequest_FieldViolation{Field: field, Description: description})
}

// err is nil without violations, else INVALID_ARGUMENT carrying a
// google.rpc.BadRequest with every violation.
func (v *violations) err() error {
	if len(v.list) == 0 {
		return nil
	}
	parts := make([]string, len(v.list))
	for i, fv := range v.list {
		parts[i] = fv.Field + ": " + fv.Description
	}
	st := status.New(codes.InvalidArgument, bounded("invalid request: "+strings.Join(parts, "; "), maxMessageBytes))
	if detailed, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: v.list}); err == nil {
		st = detailed
	}
	return st.Err()
}

// checkCameraID applies the API's id rules (of cameras, devices,
// acquisition instances and purge jobs) on top of the store's key rules.
// Its descriptions never echo the id: an id that breaks them may be huge.
func (v *violations) checkCameraID(field, id string) {
	switch {
	case id == "":
		v.add(field, "required")
	case len(id) > maxCameraIDBytes:
		v.add(field, fmt.Sprintf("must be at most %d bytes, is %d", maxCameraIDBytes, len(id)))
	default:
		if err := store.ValidateKey(id); err != nil {
			v.add(field, "must be valid UTF-8 without / \\ # ? or control characters")
		}
	}
}

// maxETagBytes bounds an etag: those the stores give are W/"" around 16
// hex digits (embedded) or a timestamp (Azure).
const maxETagBytes = 256

// checkETag refuses an etag that is not one as a reply gave it, W/"...":
// the W/ and the quotes are part of it. Compared with the stored one, a
// bare or misspelt etag would never match and be ABORTED ("read it again
// and retry"), which a client that reshapes etags would retry for ever.
// An empty etag is none: the call is unconditional.
func (v *violations) checkETag(field, etag string) {
	inner, ok := strings.CutPrefix(etag, `W/"`)
	if ok {
		inner, ok = strings.CutSuffix(inner, `"`)
	}
	switch {
	case etag == "":
	case len(etag) > maxETagBytes:
		v.add(field, fmt.Sprintf("must be at most %d bytes, is %d", maxETagBytes, len(etag)))
	case !ok || inner == "" || strings.ContainsFunc(inner, func(r rune) bool { return r == '"' || r < 0x21 || r > 0x7e }):
		v.add(field, `must be an etag exactly as a reply gave it, e.g. W/"18ee7e624de57908": the W/ and the quotes are part of it`)
	}
}

// checkTime validates an optional timestamp; nil in, nil out.
func (v *violations) checkTime(field string, ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	if err := ts.CheckValid(); err != nil {
		v.add(field, "not a valid timestamp")
		return nil
	}
	t := ts.AsTime()
	if t.Before(minTime) || t.After(maxTime) {
		v.add(field, "must be between 1601-01-01 and 9999-12-31")
		return nil
	}
	return &t
}

// checkRecording applies the rules every stored recording (an image, a
// video) shares: its camera id, a required capture time, and a size that
// is not negative. It returns the capture time, zero when invalid.
func (v *violations) checkRecording(cameraID string, capturedAt *timestamppb.Timestamp, sizeBytes int64) time.Time {
	return v.checkRecordingIn("metadata", cameraID, capturedAt, sizeBytes)
}

// checkRecordingIn is checkRecording of the recording in request field
// message, such as "metadata[3]" of a batch.
func (v *violations) checkRecordingIn(message, cameraID string, capturedAt *timestamppb.Timestamp, sizeBytes int64) time.Time {
	v.checkCameraID(message+".camera_id", cameraID)
	var at time.Time
	if capturedAt == nil {
		v.add(message+".captured_at", "required")
	} else if t := v.checkTime(message+".captured_at", capturedAt); t != nil {
		at = *t
	}
	if sizeBytes < 0 {
		v.add(message+".size_bytes", "must not be negative")
	}
	return at
}

// checkSpan validates optional [start, end) bounds.
func (v *violations) checkSpan(start, end *timestamppb.Timestamp) images.Span {
	span := images.Span{Start: v.checkTime("start_time", start), End: v.checkTime("end_time", end)}
	if span.Start != nil && span.End != nil && span.Start.After(*span.End) {
		v.add("start_time", "must not be after end_time")
	}
	return span
}

// checkPageSize returns the page size to use: 0 means the default, and
// one over the maximum is lowered to it (AIP-158), as a client asking for
// everything gets the most a page holds.
func (v *violations) checkPageSize(size int32) int {
	switch {
	case size < 0:
		v.add("page_size", "must not be negative")
		return 0
	case size == 0:
		return defaultPageSize
	}
	return int(min(size, maxPageSize))
}
