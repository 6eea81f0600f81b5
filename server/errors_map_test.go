package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
)

// TestErrorCodes: each domain sentinel, wrapped as the store and the
// engine wrap them, reaches the client with its code and a generic message.
// The server validates requests before the store or the engine sees them,
// so most of these no request produces; the table is tested through the
// mapping function (TestClockStepBackDuringStartPurge reaches
// ErrFutureCutoff over gRPC).
func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{store.ErrNotFound, codes.NotFound},
		{store.ErrAlreadyExists, codes.AlreadyExists},
		{store.ErrConflict, codes.Aborted},
		{store.ErrInvalidKey, codes.InvalidArgument},
		{store.ErrInvalidEntity, codes.InvalidArgument},
		{store.ErrTooLarge, codes.InvalidArgument},
		{store.ErrInvalidQuery, codes.InvalidArgument},
		{store.ErrInvalidBatch, codes.InvalidArgument},
		{retention.ErrFutureCutoff, codes.InvalidArgument},
		{retention.ErrNoKinds, codes.InvalidArgument},
		{store.ErrCorrupt, codes.DataLoss},
		{store.ErrInsufficientStorage, codes.ResourceExhausted},
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			wrapped := fmt.Errorf("in /secret/path: %w", tc.err)
			st, _ := status.FromError(toStatus(t.Context(), slog.New(slog.DiscardHandler), wrapped))
			if st.Code() != tc.code {
				t.Errorf("%v reaches the client as %v, want %v", tc.err, st.Code(), tc.code)
			}
			if st.Message() == wrapped.Error() {
				t.Errorf("the client got the error's own text %q", st.Message())
			}
		})
	}
}
