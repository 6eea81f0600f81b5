package server_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// TestHealthProbeListener serves the probe listener beside the server: it
// answers health with the server's statuses, serves nothing else, and
// stops with the server.
func TestHealthProbeListener(t *testing.T) {
	h := startServer(t, openMemPebble(t))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.ServeHealth(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", metadatav1.SingleImageMetadataService_ServiceDesc.ServiceName} {
		resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("probe of %q: %v, %v; want SERVING", service, resp, err)
		}
	}
	_, err = metadatav1.NewSingleImageMetadataServiceClient(conn).GetLatestSingleImageMetadata(t.Context(),
		&metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("an API call on the probe listener: %v, want UNIMPLEMENTED", err)
	}
	h.shutdown(t, t.Context())
	if err := <-served; err != nil {
		t.Fatalf("ServeHealth returned %v after Shutdown, want nil", err)
	}
}
