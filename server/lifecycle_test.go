package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

var serviceNames = []string{
	"metadata.v1.SingleImageMetadataService",
	"metadata.v1.PanoImageMetadataService",
	"metadata.v1.PreStitchImageMetadataService",
	"metadata.v1.VideoMetadataService",
	"metadata.v1.DeviceStateService",
	"metadata.v1.AcquisitionInstanceService",
}

func TestHealth(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		for _, service := range append([]string{""}, serviceNames...) {
			t.Run("service "+service, func(t *testing.T) { requireServing(t, h, service) })
		}
		t.Run("unknown service", func(t *testing.T) {
			_, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "metadata.v1.NoSuchService"})
			requireCode(t, err, codes.NotFound)
		})
	})
}

// TestBudgetHealth: the storage budget's health service serves while the
// budget holds (or there is none), and not while its check fails; the
// other services go on serving.
func TestBudgetHealth(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func() error
		want  healthpb.HealthCheckResponse_ServingStatus
	}{
		{"no budget", nil, healthpb.HealthCheckResponse_SERVING},
		{"under budget", func() error { return nil }, healthpb.HealthCheckResponse_SERVING},
		{"over budget, blocked by holds", func() error { return errors.New("only held images are left") }, healthpb.HealthCheckResponse_NOT_SERVING},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startServerOpts(t, openMemPebble(t), serverOpts{budgetCheck: tc.check})
			resp, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: server.BudgetHealthService})
			requireOK(t, err, "health of the budget")
			if resp.GetStatus() != tc.want {
				t.Errorf("health of %s: %v, want %v", server.BudgetHealthService, resp.GetStatus(), tc.want)
			}
			requireServing(t, h, "")
			requireServing(t, h, server.WritesHealthService)
		})
	}
}

func TestReflection(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(t.Context())
		requireOK(t, err, "open reflection stream")
		ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
			t.Helper()
			requireOK(t, stream.Send(req), "send reflection request")
			resp, err := stream.Recv()
			requireOK(t, err, "receive reflection response")
			if e := resp.GetErrorResponse(); e != nil {
				t.Fatalf("reflection error %d: %s", e.GetErrorCode(), e.GetErrorMessage())
			}
			return resp
		}

		var listed []string
		for _, s := range ask(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
		}).GetListServicesResponse().GetService() {
			listed = append(listed, s.GetName())
		}
		for _, want := range append([]string{"grpc.health.v1.Health"}, serviceNames...) {
			if !slices.Contains(listed, want) {
				t.Errorf("reflection lists %q, missing %s", listed, want)
			}
		}
		// grpcurl describes a service from the file that defines it.
		for _, service := range serviceNames {
			files := ask(&reflectionpb.ServerReflectionRequest{
				MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: service},
			}).GetFileDescriptorResponse().GetFileDescriptorProto()
			if len(files) == 0 {
				t.Errorf("reflection has no file defining %s", service)
			}
		}
		requireOK(t, stream.CloseSend(), "close reflection stream")
	})
}

// TestCallsAreLogged checks that the server logs every call, but not
// health probes.
func TestCallsAreLogged(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		_, err := h.single.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
		requireCode(t, err, codes.NotFound)
		requireServing(t, h, "")
		logs := h.logs.String()
		for _, want := range []string{"GetLatestSingleImageMetadata", "NotFound"} {
			if !strings.Contains(logs, want) {
				t.Errorf("log lacks %q:\n%s", want, logs)
			}
		}
		if strings.Contains(logs, "grpc.health.v1.Health") {
			t.Errorf("log records health probes:\n%s", logs)
		}
	})
}

// TestRestartKeepsImages creates images of every kind through gRPC on an
// on-disk store, stops the server and closes the store, then reads them
// back through a new server on the reopened store.
func TestRestartKeepsImages(t *testing.T) {
	dir := t.TempDir()
	db, closeDB := openPebble(t, pebble.Options{Dir: dir})
	h := startServer(t, db)
	var shots []image
	for _, s := range []shot{{"cam-1", 1}, {"cam-1", 3}, {"cam-1", 2}, {"cam-2", 2}} {
		img := sample(s.camera, minute(s.minute))
		img.Attributes["minute"] = minute(s.minute).Format("15:04")
		img.IsClearDay, img.CorrelationID = s.minute != 3, "pano-1"
		shots = append(shots, img)
		for _, k := range kinds {
			mustCreate(t, k.client(h), img)
		}
	}
	h.shutdown(t, context.Background())
	requireOK(t, closeDB(), "close store")

	db, _ = openPebble(t, pebble.Options{Dir: dir})
	h = startServer(t, db)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c := k.client(h)
			want := func(i int) image { return stored(k, shots[i]) }
			latest, err := c.getLatest(t.Context(), "cam-1")
			requireOK(t, err, "get latest")
			requireImage(t, latest, want(1))
			got, next, err := c.list(t.Context(), listQuery{cameraID: "cam-1"})
			requireOK(t, err, "list")
			requireImages(t, got, []image{want(1), want(2), want(0)})
			if next != "" {
				t.Errorf("list of every image has next_page_token %q", next)
			}
			batch, err := c.batchGetLatest(t.Context(), []string{"cam-2", "cam-1"}, nil, nil)
			requireOK(t, err, "batch get latest")
			requireImages(t, batch, []image{want(3), want(1)})

			again, err := c.create(t.Context(), shots[0])
			requireOK(t, err, "repeat a create made before the restart")
			requireImage(t, again, want(0))
			changed := shots[0]
			changed.BlobURI += "?v=2"
			_, err = c.create(t.Context(), changed)
			requireCode(t, err, codes.AlreadyExists)
		})
	}
	clearDay, err := h.pano.GetLatestClearDayPanoImageMetadata(t.Context(), &metadatav1.GetLatestClearDayPanoImageMetadataRequest{CameraId: "cam-1"})
	requireOK(t, err, "get latest clear day")
	requireImage(t, fromPano(clearDay.GetMetadata()), stored(kinds[1], shots[2]))
	correlated := listByCorrelation(t, h, &metadatav1.ListPreStitchImageMetadataByCorrelationRequest{CameraId: "cam-1", PanoImageCorrelationId: "pano-1"})
	requireImages(t, correlated, []image{stored(kinds[2], shots[1]), stored(kinds[2], shots[2]), stored(kinds[2], shots[0])})
}

// TestShutdown checks that Shutdown returns, lets a call in flight finish,
// and that calls fail afterwards.
func TestShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		t.Run("idle", func(t *testing.T) {
			h := startServer(t, b.open(t))
			seedEveryKind(t, h)
			h.shutdown(t, context.Background())
			requireRefused(t, h)
		})
		t.Run("call in flight finishes", func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			h := startServer(t, hookQuery(b.open(t), blockFirstQuery(entered, release)))
			seedEveryKind(t, h)
			watch := watchHealth(t, h)

			inFlight := make(chan error, 1)
			go func() { inFlight <- readCalls[0].call(t.Context(), h) }()
			<-entered
			stopped := make(chan struct{})
			go func() {
				h.shutdown(t, context.Background())
				close(stopped)
			}()
			watch.awaitNotServing(t)
			close(release)
			requireOK(t, <-inFlight, "call in flight during shutdown")
			<-stopped
			requireRefused(t, h)
		})
		t.Run("ended context cuts calls off", func(t *testing.T) {
			entered := make(chan struct{})
			h := startServer(t, hookQuery(b.open(t), blockFirstQuery(entered, nil)))
			inFlight := make(chan error, 1)
			go func() { inFlight <- readCalls[0].call(t.Context(), h) }()
			<-entered
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			h.shutdown(t, ctx)
			if err := <-inFlight; err == nil {
				t.Error("call in flight succeeded after a shutdown whose context had ended")
			}
			requireRefused(t, h)
		})
	})
}

// blockFirstQuery makes the first Query signal entered and wait for release
// (nil waits for the call's end).
func blockFirstQuery(entered, release chan struct{}) queryHook {
	first := make(chan struct{}, 1)
	first <- struct{}{}
	return func(ctx context.Context, next func() (store.Page, error)) (store.Page, error) {
		select {
		case <-first:
		default:
			return next()
		}
		close(entered)
		select {
		case <-release:
			return next()
		case <-ctx.Done():
			return store.Page{}, ctx.Err()
		}
	}
}

// healthWatch is an open health Watch stream of the whole server.
type healthWatch struct {
	stream healthpb.Health_WatchClient
	cancel context.CancelFunc
}

// watchHealth opens a Watch of the whole server and waits for SERVING.
func watchHealth(t *testing.T, h *harness) *healthWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	stream, err := healthpb.NewHealthClient(h.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	requireOK(t, err, "watch health")
	resp, err := stream.Recv()
	requireOK(t, err, "first health status")
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v before shutdown, want SERVING", resp.GetStatus())
	}
	return &healthWatch{stream: stream, cancel: cancel}
}

// awaitNotServing waits for the server to report NOT_SERVING, which
// Shutdown does before it stops accepting calls, then ends the watch so it
// does not hold the shutdown up.
func (w *healthWatch) awaitNotServing(t *testing.T) {
	t.Helper()
	defer w.cancel()
	for {
		resp, err := w.stream.Recv()
		requireOK(t, err, "health status")
		if resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			return
		}
	}
}

// refusedCalls is one call of each service of the API, a write where the
// service has one; requireRefused finds a service missing here.
var refusedCalls = map[string]func(ctx context.Context, h *harness) error{
	"metadata.v1.SingleImageMetadataService": func(ctx context.Context, h *harness) error {
		_, err := h.single.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-9", CapturedAt: timestamppb.New(minute(1))}})
		return err
	},
	"metadata.v1.PanoImageMetadataService": func(ctx context.Context, h *harness) error {
		_, err := h.pano.CreatePanoImageMetadata(ctx, &metadatav1.CreatePanoImageMetadataRequest{
			Metadata: &metadatav1.PanoImageMetadata{CameraId: "cam-9", CapturedAt: timestamppb.New(minute(1))}})
		return err
	},
	"metadata.v1.PreStitchImageMetadataService": func(ctx context.Context, h *harness) error {
		_, err := h.preStitch.CreatePreStitchImageMetadata(ctx, &metadatav1.CreatePreStitchImageMetadataRequest{
			Metadata: &metadatav1.PreStitchImageMetadata{CameraId: "cam-9", CapturedAt: timestamppb.New(minute(1))}})
		return err
	},
	"metadata.v1.VideoMetadataService": func(ctx context.Context, h *harness) error {
		_, err := h.video.CreateVideoMetadata(ctx, &metadatav1.CreateVideoMetadataRequest{
			Metadata: &metadatav1.VideoMetadata{CameraId: "cam-9", CapturedAt: timestamppb.New(minute(1))}})
		return err
	},
	"metadata.v1.DeviceStateService": func(ctx context.Context, h *harness) error {
		_, err := h.devices.UpdateDeviceState(ctx, &metadatav1.UpdateDeviceStateRequest{
			DeviceState: &metadatav1.DeviceState{DeviceId: "cam-9"}, AllowMissing: true})
		return err
	},
	"metadata.v1.AcquisitionInstanceService": func(ctx context.Context, h *harness) error {
		_, err := h.acquisition.RecordAcquisitionInstance(ctx, &metadatav1.RecordAcquisitionInstanceRequest{
			Instance: &metadatav1.AcquisitionInstance{InstanceId: "run-9", DeviceId: "cam-9",
				RuntimeStatus: metadatav1.RuntimeStatus_RUNTIME_STATUS_RUNNING}})
		return err
	},
	"metadata.v1.FleetService": func(ctx context.Context, h *harness) error {
		_, err := metadatav1.NewFleetServiceClient(h.conn).ListCameras(ctx, &metadatav1.ListCamerasRequest{
			ImageType: metadatav1.ImageType_IMAGE_TYPE_SINGLE})
		return err
	},
	"metadata.v1.AdminService": func(ctx context.Context, h *harness) error {
		stream, err := metadatav1.NewAdminServiceClient(h.conn).Backup(ctx, &metadatav1.BackupRequest{})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	},
	"metadata.v1.RetentionService": func(ctx context.Context, h *harness) error {
		_, err := h.retention.StartPurge(ctx, &metadatav1.StartPurgeRequest{
			Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(minute(1))}})
		return err
	},
}

// requireRefused fails unless calls to every service of the API (each read
// of readCalls and one call, a write where there is one, of every service
// the API's descriptors name) and to health fail UNAVAILABLE.
func requireRefused(t *testing.T, h *harness) {
	t.Helper()
	for _, rc := range readCalls {
		requireCode(t, rc.call(t.Context(), h), codes.Unavailable)
	}
	services := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("metadata.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			name := string(f.Services().Get(i).FullName())
			call, ok := refusedCalls[name]
			if !ok {
				t.Errorf("refusedCalls has no call of %s", name)
				continue
			}
			services++
			if err := call(t.Context(), h); status.Code(err) != codes.Unavailable {
				t.Errorf("%s: %v, want UNAVAILABLE", name, err)
			}
		}
		return true
	})
	if services != len(refusedCalls) {
		t.Errorf("called %d services of metadata.v1, want all %d of refusedCalls", services, len(refusedCalls))
	}
	_, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	requireCode(t, err, codes.Unavailable)
}
