package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
)

// errorCodes maps domain errors to gRPC codes, first match wins: the one
// table every service's errors go through (see errorWords). Errors found
// nowhere here are internal: the client gets a generic message and the
// log gets the detail.
//
// A reason, where set, goes to the client as a google.rpc.ErrorInfo of
// errorDomain, so that it can branch on the reason rather than parse the
// message; the call's errorWords add the metadata naming the resource.
var errorCodes = []struct {
	err     error
	code    codes.Code
	message string
	reason  string
}{
	{store.ErrNotFound, codes.NotFound, "not found", "NOT_FOUND"},
	{store.ErrAlreadyExists, codes.AlreadyExists, "already exists", "ALREADY_EXISTS"},
	{store.ErrConflict, codes.Aborted, "concurrent modification; read again and retry", "CONCURRENT_MODIFICATION"},
	{store.ErrInvalidKey, codes.InvalidArgument, "invalid key", ""},
	{store.ErrInvalidEntity, codes.InvalidArgument, "invalid entity", ""},
	{store.ErrTooLarge, codes.InvalidArgument, "too large", ""},
	{store.ErrInvalidQuery, codes.InvalidArgument, "invalid query", ""},
	{store.ErrInvalidBatch, codes.InvalidArgument, "invalid batch", ""},
	{retention.ErrFutureCutoff, codes.InvalidArgument, "the purge cutoff is in the future", ""},
	{retention.ErrNoKinds, codes.InvalidArgument, "no image type to purge", ""},
	{retention.ErrPurgeRunning, codes.FailedPrecondition, "a purge of the same image type is running", ""},
	{retention.ErrNoPolicies, codes.FailedPrecondition, "no retention policy sets a retention for the image types; create retentionPolicies/default or another policy first", ""},
	{retention.ErrOutboxTrimmed, codes.OutOfRange, "the deleted images from that position were retired", ""},
	{retention.ErrOutboxAhead, codes.OutOfRange, "that position is past the end of the deleted images", ""},
	{retention.ErrBadResumeToken, codes.InvalidArgument, "not a resume_token of WatchDeletedImages", ""},
	{retention.ErrJobEnded, codes.FailedPrecondition, "the purge has ended", ""},
	{retention.ErrCameraHeld, codes.FailedPrecondition, "the camera is on legal hold: release the hold first", "CAMERA_HELD"},
	{retention.ErrTooManyPrefixes, codes.ResourceExhausted, fmt.Sprintf("at most %d prefix policies", retention.MaxPrefixPolicies), ""},
	{fleet.ErrNoDailyCounts, codes.FailedPrecondition, "this store keeps no images per day: only the embedded store tallies them", ""},
	{backup.ErrBusy, codes.FailedPrecondition, "another backup is running; try again once it has ended", ""},
	{store.ErrCorrupt, codes.DataLoss, "stored data is damaged", ""},
	{store.ErrInsufficientStorage, codes.ResourceExhausted, "storage nearly full; writes resume once space is freed", ""},
	{context.Canceled, codes.Canceled, "canceled", ""},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "deadline exceeded", ""},
}

// errorWords are what one call can say of an error better than the table,
// never changing its code: its own message for a sentinel (naming the
// camera, device, job or policy it was about), and the request field
// holding the entity whose stored property a *store.PropertyError names,
// so that the client gets a field violation.
type errorWords struct {
	messages map[error]string
	entity   string            // e.g. "metadata"; empty: no field violation
	fields   map[string]string // property name -> field of entity
	// resource is the ErrorInfo metadata of a reason of the table: the
	// request fields naming what the call was about, e.g. {"name":
	// "retentionPolicies/default"} or {"camera_id": "cam-1"}.
	resource map[string]string
}

// toStatus turns a domain error into a gRPC status error, in the table's
// words. Messages are generic on purpose: error text from below may name
// files, tables or engine state that clients must not see.
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	return errorWords{}.status(ctx, log, err)
}

// status is toStatus in the call's words where it has some.
func (w errorWords) status(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var prop *store.PropertyError
	if w.entity != "" && errors.As(err, &prop) {
		return propertyStatus(prop, w.entity, w.fields)
	}
	var running *retention.RunningError
	if errors.As(err, &running) {
		return runningStatus(running)
	}
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			message, ok := w.messages[m.err]
			if !ok {
				message = m.message
			}
			return errorInfoStatus(status.New(m.code, message), m.reason, w.resource).Err()
		}
	}
	log.ErrorContext(ctx, "internal error", "err", err)
	return status.Error(codes.Internal, "internal error")
}

// propertyStatus is INVALID_ARGUMENT naming the request field behind a
// stored property that broke the entity rules: message is the request field
// holding the entity and fields maps property names to its fields.
func propertyStatus(prop *store.PropertyError, message string, fields map[string]string) error {
	field := message
	if name, ok := fields[prop.Property]; ok {
		field += "." + name
	}
	var v violations
	v.add(field, prop.Err.Error())
	return v.err()
}

// runningStatus is FAILED_PRECONDITION naming the running purge a new one
// overlaps, as a PURGE_RUNNING precondition failure clients can act on.
func runningStatus(running *retention.RunningError) error {
	st := status.New(codes.FailedPrecondition, fmt.Sprintf("purge %s of %s images is running", running.JobID, running.Kind))
	if detailed, err := st.WithDetails(&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{
		Type: "PURGE_RUNNING", Subject: "purges/" + running.JobID, Description: "at most one purge runs per image type",
	}}}); err == nil {
		st = detailed
	}
	return st.Err()
}

// errorDomain is the google.rpc.ErrorInfo domain of every reason this
// server gives: the API's package, which the first reasons (WATCH_ENDED,
// RESUME_TOKEN_AHEAD) were given under, so that clients that check it keep
// working.
const errorDomain = "metadata.v1"

// errorInfoStatus is st with a google.rpc.ErrorInfo of reason and
// metadata; st as it is without a reason.
func errorInfoStatus(st *status.Status, reason string, metadata map[string]string) *status.Status {
	if reason == "" {
		return st
	}
	if detailed, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: metadata}); err == nil {
		return detailed
	}
	return st
}
