package server_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/observed"
)

// TestCallIsTracedDownToTheStore makes a call through the real server and
// finds its server span with the store's span as a child; health checks,
// which probes make every few seconds, leave no span.
func TestCallIsTracedDownToTheStore(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	backend := observed.Backend(openMemPebble(t), observed.Options{Name: "embedded", Tracer: tp.Tracer("store")})
	h := startServerOpts(t, backend, serverOpts{tracerProvider: tp})

	if _, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.single.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
		Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-1", CapturedAt: timestamppb.New(base)}}); err != nil {
		t.Fatal(err)
	}
	h.shutdown(t, t.Context())

	var call sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		switch s.Name() {
		case "metadata.v1.SingleImageMetadataService/CreateSingleImageMetadata":
			call = s
		case "grpc.health.v1.Health/Check":
			t.Error("a health check was traced")
		}
	}
	if call == nil || call.SpanKind() != trace.SpanKindServer {
		t.Fatalf("no server span of the create among %d spans", len(recorder.Ended()))
	}
	var stored []string
	for _, s := range recorder.Ended() {
		if s.Parent().SpanID() == call.SpanContext().SpanID() {
			stored = append(stored, s.Name())
		}
	}
	if len(stored) == 0 || stored[0] != "store.transact" {
		t.Errorf("children of the create's span: %v, want the store's transact (primary and index rows in one commit)", stored)
	}
}
