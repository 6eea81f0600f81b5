package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCallLogSamplesSuccesses: successful calls are logged as the sample
// says, none by default; calls that fail always are.
func TestCallLogSamplesSuccesses(t *testing.T) {
	const method = "/metadata.v1.SingleImageMetadataService/GetLatestSingleImageMetadata"
	for _, tc := range []struct {
		name      string
		successes float64
		// low and high bound the successful calls of 1,000 that are logged.
		low, high int
	}{
		{"off", 0, 0, 0},
		{"all", 1, 1000, 1000},
		{"a tenth", 0.1, 50, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			c := callLog{log: slog.New(slog.NewTextHandler(&logs, nil)), successes: tc.successes}
			for range 1000 {
				c.finished(context.Background(), method, "unary", time.Now(), nil)
			}
			c.finished(context.Background(), method, "unary", time.Now(), status.Error(codes.NotFound, "no image"))
			c.finished(context.Background(), method, "unary", time.Now(), status.Error(codes.Internal, "internal error"))
			ok := strings.Count(logs.String(), "grpc.code=OK")
			if ok < tc.low || ok > tc.high {
				t.Errorf("%d successful calls of 1000 logged, want %d to %d", ok, tc.low, tc.high)
			}
			for _, code := range []string{"grpc.code=NotFound", "grpc.code=Internal"} {
				if !strings.Contains(logs.String(), code) {
					t.Errorf("no line of the call that failed with %s", code)
				}
			}
		})
	}
}

// TestCallLogLeavesOutCallersThatGaveUp: a stream its caller cancelled
// (a Watch closed, grpcurl's reflection stream) is sampled as a success,
// not logged as a failed call; a call cancelled while its caller still
// waits is a failure and keeps its line.
func TestCallLogLeavesOutCallersThatGaveUp(t *testing.T) {
	var logs bytes.Buffer
	c := callLog{log: slog.New(slog.NewTextHandler(&logs, nil))}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	canceled := status.Error(codes.Canceled, "context canceled")
	c.finished(gone, "/metadata.v1.SingleImageMetadataService/WatchSingleImageMetadata", "server_stream", time.Now(), canceled)
	c.finished(gone, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "bidi_stream", time.Now(), canceled)
	if logs.Len() > 0 {
		t.Errorf("calls their callers cancelled were logged:\n%s", logs.String())
	}
	c.finished(context.Background(), "/metadata.v1.RetentionService/WatchPurge", "server_stream", time.Now(), canceled)
	if !strings.Contains(logs.String(), "grpc.code=Canceled") {
		t.Errorf("a call cancelled while its caller waits has no line: %q", logs.String())
	}
}
