package server_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server"
)

// TestTrafficIsTheDataPlane: a purge yields to the calls Traffic records,
// so it must record the data plane's calls, unary and streaming, and not
// the health probes that come whether anyone is served or not, the
// RetentionService calls that start and watch the purge itself, the
// reflection calls grpcurl makes before each of its own, nor an
// AdminService backup; and it must forget them after LiveWindow, so a
// purge on a store gone quiet runs at full speed again. The calls go
// through the server's real interceptor chain.
func TestTrafficIsTheDataPlane(t *testing.T) {
	now := base
	traffic := &server.Traffic{Now: func() time.Time { return now }}
	h := startServerOpts(t, openMemPebble(t), serverOpts{traffic: traffic})
	ctx := t.Context()
	if traffic.Live() {
		t.Fatal("live before any call")
	}
	if _, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.retention.ListPurges(ctx, &metadatav1.ListPurgesRequest{}); err != nil {
		t.Fatal(err)
	}
	// What grpcurl does before each call: list the services over the
	// reflection stream.
	refl, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := refl.Recv(); err != nil {
		t.Fatal(err)
	}
	_ = refl.CloseSend()
	// A backup through AdminService: refused or not, it is no traffic.
	if backup, err := metadatav1.NewAdminServiceClient(h.conn).Backup(ctx, &metadatav1.BackupRequest{}); err == nil {
		_, _ = backup.Recv()
	}
	if traffic.Live() {
		t.Fatal("a health check, a RetentionService, reflection or AdminService call counted as traffic")
	}
	_, err = h.single.GetLatestSingleImageMetadata(ctx, &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
	requireCode(t, err, codes.NotFound) // a refused call is traffic all the same
	if !traffic.Live() {
		t.Fatal("a GetLatest is not traffic")
	}
	now = now.Add(server.LiveWindow)
	if traffic.Live() {
		t.Fatalf("still live %s after the last call", server.LiveWindow)
	}
	if _, err := h.single.WatchSingleImageMetadata(ctx, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-1"}}); err != nil {
		t.Fatal(err)
	}
	// The watch sends nothing until an image comes: wait for the server
	// to have begun it.
	testwait.Until(t, 10*time.Second, func() error {
		if !traffic.Live() {
			return errors.New("a watch is not traffic")
		}
		return nil
	})
}
