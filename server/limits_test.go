package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server"
)

func TestOversizedRequest(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{limits: server.Limits{MaxRequestBytes: 4096}})
	create := func(blobURI string) error {
		_, err := h.single.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{Metadata: &metadatav1.SingleImageMetadata{
			CameraId: "cam-1", CapturedAt: timestamppb.New(base), BlobUri: blobURI}})
		return err
	}
	before := h.snapshot(t)
	st := requireCode(t, create("https://blobs.test/"+strings.Repeat("x", 5000)), codes.ResourceExhausted)
	if !strings.Contains(st.Message(), "larger than max") {
		t.Errorf("RESOURCE_EXHAUSTED %q does not say the message is too large", st.Message())
	}
	h.requireUnchanged(t, before)
	requireOK(t, create("https://blobs.test/"+strings.Repeat("x", 3000)), "a request under the limit")
}

func TestRateLimitPerPrincipal(t *testing.T) {
	a := newTokenAuth(t, "reader-a,a,metadata.read\nreader-b,b,metadata.read\n")
	h := startServerOpts(t, openMemPebble(t), serverOpts{auth: a, limits: server.Limits{Rate: 0.01, Burst: 3}})
	list := func(token string) error {
		_, err := h.devices.ListDeviceStates(bearer(t.Context(), token), &metadatav1.ListDeviceStatesRequest{})
		return err
	}
	for range 3 {
		requireOK(t, list("reader-a"), "a call within the burst")
	}
	st := requireCode(t, list("reader-a"), codes.ResourceExhausted)
	if !strings.Contains(st.Message(), "a is over its rate") {
		t.Errorf("RESOURCE_EXHAUSTED %q does not name the principal's rate", st.Message())
	}
	requireOK(t, list("reader-b"), "another principal's call")
	if _, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health check with a principal over its rate: %v", err)
	}
}

// TestConcurrencyCaps: a call beyond the in-flight cap, or a WatchPurge
// stream beyond the watch cap, is refused at once rather than queued, while
// one stream holds its place; health checks still answer.
func TestConcurrencyCaps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits server.Limits
		// second is the call made while one watch is open.
		second func(h *harness, watch func(context.Context) error) error
		want   string
	}{
		{"calls in flight", server.Limits{MaxInFlight: 1}, func(h *harness, _ func(context.Context) error) error {
			_, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{})
			return err
		}, "server busy: 1 calls in flight"},
		{"watches", server.Limits{MaxWatches: 1}, func(_ *harness, watch func(context.Context) error) error {
			return watch(t.Context())
		}, "1 WatchPurge streams already open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Without the purge engine the purge stays pending, and its watch open.
			h := startServerOpts(t, openMemPebble(t), serverOpts{limits: tc.limits})
			started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
				Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(base)}})
			requireOK(t, err, "StartPurge")
			watch := func(ctx context.Context) error {
				stream, err := h.retention.WatchPurge(ctx, &metadatav1.WatchPurgeRequest{JobId: started.GetJob().GetJobId()})
				if err != nil {
					return err
				}
				_, err = stream.Recv()
				return err
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			requireOK(t, watch(ctx), "the first watch")
			st := requireCode(t, tc.second(h, watch), codes.ResourceExhausted)
			if !strings.Contains(st.Message(), tc.want) {
				t.Errorf("refused with %q, want %q", st.Message(), tc.want)
			}
			if _, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Errorf("health check at the cap: %v", err)
			}
			cancel()
			testwait.Until(t, 10*time.Second, func() error {
				_, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{})
				return err
			})
		})
	}
}

// TestFeedCap: a live image feed beyond -max-feeds is refused at once, of
// any image kind, while unary calls and a WatchPurge are still admitted;
// once a feed ends its place is free again.
func TestFeedCap(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{limits: server.Limits{MaxFeeds: 1}})
	_, err := h.single.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{Metadata: &metadatav1.SingleImageMetadata{
		CameraId: "cam-1", CapturedAt: timestamppb.New(base), BlobUri: "https://blobs.test/1"}})
	requireOK(t, err, "create")
	feed := func(ctx context.Context) error {
		stream, err := h.single.WatchSingleImageMetadata(ctx, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-1"}, StartWithLatest: true})
		if err != nil {
			return err
		}
		_, err = stream.Recv() // the latest image: the feed is open
		return err
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	requireOK(t, feed(ctx), "the first feed")

	st := requireCode(t, feed(t.Context()), codes.ResourceExhausted)
	if want := "1 image feeds already open"; !strings.Contains(st.Message(), want) {
		t.Errorf("refused with %q, want %q", st.Message(), want)
	}
	pano, err := h.pano.WatchPanoImageMetadata(t.Context(), &metadatav1.WatchPanoImageMetadataRequest{CameraIds: []string{"cam-1"}})
	requireOK(t, err, "WatchPanoImageMetadata")
	_, err = pano.Recv()
	requireCode(t, err, codes.ResourceExhausted)

	_, err = h.single.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
	requireOK(t, err, "a unary call with every feed taken")
	requirePurgeWatchable(t, h, "with every feed taken")

	cancel()
	testwait.Until(t, 10*time.Second, func() error { return feed(t.Context()) })
}

// requirePurgeWatchable starts a purge and watches it to its first
// message: the control plane still serves when, as the test says, the
// data plane's streams are all taken.
func requirePurgeWatchable(t *testing.T, h *harness, when string) {
	t.Helper()
	started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(base)}})
	requireOK(t, err, "StartPurge "+when)
	watch, err := h.retention.WatchPurge(t.Context(), &metadatav1.WatchPurgeRequest{JobId: started.GetJob().GetJobId()})
	requireOK(t, err, "WatchPurge "+when)
	_, err = watch.Recv()
	requireOK(t, err, "a WatchPurge's first message "+when)
}
