package server

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
)

// errorCodes maps domain errors to gRPC codes, first match wins. Errors
// found nowhere here are internal: the client gets a generic message and
// the log gets the detail.
var errorCodes = []struct {
	err     error
	code    codes.Code
	message string
}{
	{store.ErrNotFound, codes.NotFound, "not found"},
	{store.ErrAlreadyExists, codes.AlreadyExists, "already exists"},
	{store.ErrConflict, codes.Aborted, "concurrent modification; read again and retry"},
	{store.ErrInvalidKey, codes.InvalidArgument, "invalid key"},
	{store.ErrInvalidEntity, codes.InvalidArgument, "invalid entity"},
	{store.ErrTooLarge, codes.InvalidArgument, "too large"},
	{store.ErrInvalidQuery, codes.InvalidArgument, "invalid query"},
	{store.ErrInvalidBatch, codes.InvalidArgument, "invalid batch"},
	{retention.ErrFutureCutoff, codes.InvalidArgument, "the purge cutoff is in the future"},
	{retention.ErrNoKinds, codes.InvalidArgument, "no image type to purge"},
	{store.ErrCorrupt, codes.DataLoss, "stored data is damaged"},
	{store.ErrInsufficientStorage, codes.ResourceExhausted, "storage nearly full; writes resume once space is freed"},
	{context.Canceled, codes.Canceled, "canceled"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "deadline exceeded"},
}

// toStatus turns a domain error into a gRPC status error. Messages are
// generic on purpose: error text from below may name files, tables or
// engine state that clients must not see.
func toStatus(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			return status.Error(m.code, m.message)
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
