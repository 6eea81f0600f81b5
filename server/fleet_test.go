package server_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
)

// fleetHarness is a server with the image services and the FleetService
// on one backend, its fleet views on a test clock.
type fleetHarness struct {
	single metadatav1.SingleImageMetadataServiceClient
	fleet  metadatav1.FleetServiceClient
	clock  *testClock
}

// startFleetServer serves the fleet views of backend: from the tallies and
// partition ends on the embedded store, from camera tables each create
// writes (an interval of a nanosecond) on Azure.
func startFleetServer(t *testing.T, backend store.Backend) *fleetHarness {
	t.Helper()
	clock := &testClock{now: base}
	embedded, isEmbedded := backend.(interface {
		fleet.Embedded
		Tally(ctx context.Context, table string) error
	})
	repos := map[images.Kind]*images.Repository{}
	views := map[images.Kind]*fleet.View{}
	for _, kind := range images.Kinds {
		opts := fleet.Options{Now: clock.Now}
		repoOpts := images.Options{Kind: kind, CreateTimeout: testCreateTimeout, LandingMargin: testLandingMargin}
		if isEmbedded {
			if err := embedded.Tally(t.Context(), kind.DefaultTable()); err != nil {
				t.Fatal(err)
			}
			opts.Embedded = embedded
		} else {
			cameras, err := fleet.OpenCameraTable(t.Context(), backend, kind.DefaultTable())
			if err != nil {
				t.Fatal(err)
			}
			rec, err := fleet.NewRecorder(fleet.RecorderOptions{Table: cameras, Interval: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			opts.Cameras, repoOpts.Created = cameras, rec.Created
		}
		repo, err := images.Open(t.Context(), backend, repoOpts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Repo = repo
		if views[kind], err = fleet.Open(opts); err != nil {
			t.Fatal(err)
		}
		repos[kind] = repo
	}
	srv, err := server.New(server.Options{Single: repos[images.Single], Pano: repos[images.Pano], PreStitch: repos[images.PreStitch],
		Fleet: views, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &fleetHarness{single: metadatav1.NewSingleImageMetadataServiceClient(conn), fleet: metadatav1.NewFleetServiceClient(conn), clock: clock}
}

func (h *fleetHarness) create(t *testing.T, camera string, at time.Time) {
	t.Helper()
	_, err := h.single.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{Metadata: &metadatav1.SingleImageMetadata{
		CameraId: camera, CapturedAt: timestamppb.New(at), BlobUri: "blob://" + camera}})
	requireOK(t, err, "create")
}

const single = metadatav1.ImageType_IMAGE_TYPE_SINGLE

// harnessFleet are the fleet views startServerOpts serves: on the tallies
// (which the retention engine's driver keeps) of an embedded store, else
// on camera tables that no recorder writes, so that every RPC of the API
// is served.
func harnessFleet(t testing.TB, backend store.Backend, repos map[images.Kind]*images.Repository) map[images.Kind]*fleet.View {
	t.Helper()
	embedded, isEmbedded := backend.(fleet.Embedded)
	views := map[images.Kind]*fleet.View{}
	for kind, repo := range repos {
		opts := fleet.Options{Repo: repo}
		if isEmbedded {
			opts.Embedded = embedded
		} else {
			primary, _ := repo.Tables()
			cameras, err := fleet.OpenCameraTable(t.Context(), backend, primary.Name())
			if err != nil {
				t.Fatal(err)
			}
			opts.Cameras = cameras
		}
		view, err := fleet.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		views[kind] = view
	}
	return views
}

// TestFleetService reads the four fleet views over gRPC on each backend:
// the inventory paged with exact first and latest captures, a silent
// camera found and gone once it sends again, coverage gaps, and the fleet
// at a moment.
func TestFleetService(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := startFleetServer(t, b.open(t))
		for _, at := range []time.Duration{0, time.Minute, 5 * time.Minute, 6 * time.Minute} {
			h.create(t, "cam-1", base.Add(at+1500*time.Millisecond))
		}
		h.create(t, "cam-2", base.Add(3*time.Minute))
		h.clock.set(base.Add(time.Hour))

		var ids []string
		req := &metadatav1.ListCamerasRequest{ImageType: single, CameraIdPrefix: "cam-", PageSize: 1}
		for {
			resp, err := h.fleet.ListCameras(t.Context(), req)
			requireOK(t, err, "ListCameras")
			for _, c := range resp.GetCameras() {
				ids = append(ids, c.GetCameraId())
				if c.GetCameraId() == "cam-1" && (!c.GetFirstCapturedAt().AsTime().Equal(base.Add(1500*time.Millisecond)) ||
					!c.GetLatestCapturedAt().AsTime().Equal(base.Add(6*time.Minute+1500*time.Millisecond))) {
					t.Fatalf("cam-1 = %v", c)
				}
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
		if len(ids) != 2 || ids[0] != "cam-1" || ids[1] != "cam-2" {
			t.Fatalf("cameras = %v, want [cam-1 cam-2]", ids)
		}

		silentReq := &metadatav1.ListSilentCamerasRequest{ImageType: single, SilentFor: durationpb.New(55 * time.Minute)}
		silent, err := h.fleet.ListSilentCameras(t.Context(), silentReq)
		requireOK(t, err, "ListSilentCameras")
		if len(silent.GetCameras()) != 1 || silent.GetCameras()[0].GetCameraId() != "cam-2" {
			t.Fatalf("silent = %v, want cam-2", silent.GetCameras())
		}
		h.create(t, "cam-2", base.Add(59*time.Minute))
		silent, err = h.fleet.ListSilentCameras(t.Context(), silentReq)
		requireOK(t, err, "ListSilentCameras")
		if len(silent.GetCameras()) != 0 {
			t.Fatalf("silent after cam-2 sent again = %v, want none", silent.GetCameras())
		}

		cov, err := h.fleet.GetCoverage(t.Context(), &metadatav1.GetCoverageRequest{ImageType: single, CameraId: "cam-1",
			StartTime: timestamppb.New(base), EndTime: timestamppb.New(base.Add(10 * time.Minute))})
		requireOK(t, err, "GetCoverage")
		gaps := cov.GetGaps()
		if len(gaps) != 2 || !gaps[0].GetStartTime().AsTime().Equal(base.Add(2*time.Minute)) || !gaps[0].GetEndTime().AsTime().Equal(base.Add(5*time.Minute)) ||
			!gaps[1].GetStartTime().AsTime().Equal(base.Add(7*time.Minute)) || cov.GetCoveredFraction() != 0.4 || cov.GetImages() != 4 {
			t.Fatalf("coverage = %v", cov)
		}

		moment, err := h.fleet.ListFleetImages(t.Context(), &metadatav1.ListFleetImagesRequest{ImageType: single,
			StartTime: timestamppb.New(base.Add(time.Minute)), EndTime: timestamppb.New(base.Add(5*time.Minute + 2*time.Second))})
		requireOK(t, err, "ListFleetImages")
		if n := len(moment.GetImages()); n != 3 || moment.GetNextPageToken() != "" {
			t.Fatalf("fleet images = %v, want cam-1 at 1 and 5 minutes and cam-2 at 3", moment.GetImages())
		}
	})
}

// TestFleetServiceRefusals refuses bad requests with the field at fault,
// and images per day where the store keeps none.
func TestFleetServiceRefusals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := startFleetServer(t, b.open(t))
		ctx := t.Context()
		hour := func(n int) *timestamppb.Timestamp { return timestamppb.New(base.Add(time.Duration(n) * time.Hour)) }
		_, err := h.fleet.ListFleetImages(ctx, &metadatav1.ListFleetImagesRequest{ImageType: single, StartTime: hour(0), EndTime: timestamppb.New(base.Add(time.Hour + time.Second))})
		requireFieldViolation(t, err, "end_time")
		_, err = h.fleet.ListFleetImages(ctx, &metadatav1.ListFleetImagesRequest{StartTime: hour(0), EndTime: hour(1)})
		requireFieldViolation(t, err, "image_type")
		_, err = h.fleet.ListCameras(ctx, &metadatav1.ListCamerasRequest{ImageType: single, PageToken: "junk"})
		requireFieldViolation(t, err, "page_token")
		_, err = h.fleet.ListSilentCameras(ctx, &metadatav1.ListSilentCamerasRequest{ImageType: single})
		requireFieldViolation(t, err, "silent_for")
		_, err = h.fleet.ListSilentCameras(ctx, &metadatav1.ListSilentCamerasRequest{ImageType: single, SilentFor: durationpb.New(time.Hour), LookBack: durationpb.New(time.Minute)})
		requireFieldViolation(t, err, "look_back")
		_, err = h.fleet.GetCoverage(ctx, &metadatav1.GetCoverageRequest{ImageType: single, CameraId: "c", StartTime: timestamppb.New(base.Add(time.Second)), EndTime: hour(1)})
		requireFieldViolation(t, err, "start_time")
		_, err = h.fleet.GetCoverage(ctx, &metadatav1.GetCoverageRequest{ImageType: single, CameraId: "c", StartTime: hour(0), EndTime: hour(367 * 24)})
		requireFieldViolation(t, err, "end_time")
		_, err = h.fleet.GetCoverage(ctx, &metadatav1.GetCoverageRequest{ImageType: single, CameraId: "c", StartTime: hour(0), EndTime: hour(1),
			ExpectedInterval: durationpb.New(90 * time.Second)})
		requireFieldViolation(t, err, "expected_interval")
		_, err = h.fleet.ListCameras(ctx, &metadatav1.ListCamerasRequest{ImageType: single, DailyCountsStartTime: hour(0)})
		requireFieldViolation(t, err, "daily_counts_end_time")
		_, err = h.fleet.ListCameras(ctx, &metadatav1.ListCamerasRequest{ImageType: single, DailyCountsStartTime: hour(0), DailyCountsEndTime: hour(48)})
		if b.name == "azure" {
			requireCode(t, err, codes.FailedPrecondition)
		} else {
			requireOK(t, err, "ListCameras with daily counts")
		}
	})
}
