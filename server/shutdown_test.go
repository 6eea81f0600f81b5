package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store"
)

// shutdownReturns runs Shutdown(ctx) and waits for it up to bound, failing
// the test if it has not returned by then.
func shutdownReturns(t *testing.T, h *harness, ctx context.Context, bound time.Duration) error {
	t.Helper()
	returned := make(chan error, 1)
	go func() { returned <- h.srv.Shutdown(ctx) }()
	select {
	case err := <-returned:
		return err
	case <-time.After(bound):
		t.Fatalf("Shutdown has not returned %s after it was called", bound)
		return nil
	}
}

// TestShutdownEndsWithACallStuckInTheStore checks that a call that ignores
// its cancelled context (stuck in the store) does not hold Shutdown past its
// context: Shutdown returns by then and says calls are stuck, so the daemon
// exits without closing the store under them.
func TestShutdownEndsWithACallStuckInTheStore(t *testing.T) {
	entered, release, left := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once bool
	h := startServer(t, hookQuery(openMemPebble(t), func(_ context.Context, next func() (store.Page, error)) (store.Page, error) {
		if once {
			return next()
		}
		once = true
		close(entered)
		<-release // deaf to its context, as a call stuck in a driver is
		defer close(left)
		return next()
	}))
	inFlight := make(chan error, 1)
	go func() { inFlight <- readCalls[0].call(context.Background(), h) }()
	<-entered
	// The stuck call leaves the store before it closes, when the test ends:
	// its client has its answer (cut off) long before, so the test waits for
	// the store call itself, whose iterator would otherwise be open at the
	// close.
	t.Cleanup(func() {
		close(release)
		<-inFlight
		<-left
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := shutdownReturns(t, h, ctx, 10*time.Second)
	if !errors.Is(err, server.ErrCallsStuck) {
		t.Errorf("Shutdown with a call stuck = %v, want ErrCallsStuck", err)
	}
	if err := <-h.served; err != nil {
		t.Errorf("Serve returned %v after Shutdown", err)
	}
	h.stopPurges()
	h.shutdownOnce.Do(func() {})
}

// TestShutdownEndsWatchesAtOnce checks that an open WatchPurge stream, which
// would otherwise last as long as its purge, ends with UNAVAILABLE as soon
// as the server shuts down, and does not hold the shutdown for its whole
// timeout.
func TestShutdownEndsWatchesAtOnce(t *testing.T) {
	// Without the purge engine a started purge stays pending: its watch
	// never ends by itself.
	h := startServerWith(t, openMemPebble(t), false)
	started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}})
	requireOK(t, err, "start purge")
	stream, err := h.retention.WatchPurge(t.Context(), &metadatav1.WatchPurgeRequest{JobId: started.GetJob().GetJobId()})
	requireOK(t, err, "watch purge")
	_, err = stream.Recv()
	requireOK(t, err, "first snapshot")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shutdownReturns(t, h, ctx, 10*time.Second); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	_, err = stream.Recv()
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != "server shutting down; watch again" {
		t.Errorf("watch during shutdown ended with %v, want UNAVAILABLE from the server", err)
	}
	if err := <-h.served; err != nil {
		t.Errorf("Serve returned %v after Shutdown", err)
	}
	h.shutdownOnce.Do(h.stopPurges) // the test shut the server down; the engine stops before the store closes
}

// TestShutdownEndsHealthWatchesAtOnce checks that an open health Watch,
// which grpc's health server keeps open while its client stays, sees
// NOT_SERVING and ends with UNAVAILABLE as soon as the server shuts down,
// and does not hold the shutdown for its whole timeout.
func TestShutdownEndsHealthWatchesAtOnce(t *testing.T) {
	// No purge engine: the test ends the shutdown itself, so nothing else
	// would stop one before the store closes.
	h := startServerWith(t, openMemPebble(t), false)
	stream, err := healthpb.NewHealthClient(h.conn).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	requireOK(t, err, "watch health")
	first, err := stream.Recv()
	requireOK(t, err, "first status")
	if first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first status %s, want SERVING", first.GetStatus())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shutdownReturns(t, h, ctx, 10*time.Second); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	var statuses []healthpb.HealthCheckResponse_ServingStatus
	for {
		resp, err := stream.Recv()
		if err != nil {
			if st, _ := status.FromError(err); st.Code() != codes.Unavailable || st.Message() != "server shutting down; watch again" {
				t.Errorf("health watch during shutdown ended with %v, want UNAVAILABLE from the server", err)
			}
			break
		}
		statuses = append(statuses, resp.GetStatus())
	}
	if len(statuses) == 0 || statuses[len(statuses)-1] != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("statuses during shutdown %v, want NOT_SERVING last", statuses)
	}
	if err := <-h.served; err != nil {
		t.Errorf("Serve returned %v after Shutdown", err)
	}
	h.shutdownOnce.Do(h.stopPurges) // the test shut the server down; the engine stops before the store closes
}
