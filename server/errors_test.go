package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
)

// secret stands for internal detail, such as paths and engine state, that
// the log must get and clients must not.
const secret = "disk /secret/path exploded"

// readCall is one read RPC that queries a table.
type readCall struct {
	name string
	call func(ctx context.Context, h *harness) error
}

var readCalls = []readCall{
	{name: "GetLatestSingleImageMetadata", call: func(ctx context.Context, h *harness) error {
		_, err := h.single.GetLatestSingleImageMetadata(ctx, &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"})
		return err
	}},
	{name: "BatchGetLatestPanoImageMetadata", call: func(ctx context.Context, h *harness) error {
		_, err := h.pano.BatchGetLatestPanoImageMetadata(ctx, &metadatav1.BatchGetLatestPanoImageMetadataRequest{CameraIds: []string{"cam-1", "cam-2"}})
		return err
	}},
	{name: "ListPreStitchImageMetadata", call: func(ctx context.Context, h *harness) error {
		_, err := h.preStitch.ListPreStitchImageMetadata(ctx, &metadatav1.ListPreStitchImageMetadataRequest{CameraId: "cam-1"})
		return err
	}},
	{name: "GetLatestClearDayPanoImageMetadata", call: func(ctx context.Context, h *harness) error {
		_, err := h.pano.GetLatestClearDayPanoImageMetadata(ctx, &metadatav1.GetLatestClearDayPanoImageMetadataRequest{CameraId: "cam-1"})
		return err
	}},
	{name: "ListPreStitchImageMetadataByCorrelation", call: func(ctx context.Context, h *harness) error {
		_, err := h.preStitch.ListPreStitchImageMetadataByCorrelation(ctx, &metadatav1.ListPreStitchImageMetadataByCorrelationRequest{
			CameraId: "cam-1", PanoImageCorrelationId: "pano-1"})
		return err
	}},
}

// TestInternalErrorsDoNotLeak makes the first Query below the server fail
// or panic with secret detail: the call gets INTERNAL "internal error"
// without the detail, the log gets it, and the next call is served.
//
// The calls of a fault that returns share a server, the fault armed anew
// for each. Panics run in a child test process each: a panic the server
// fails to recover kills the process, and must fail only its own case.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	faults := []struct {
		name  string
		fault func() error
		// crashes marks a fault that may kill the process if unrecovered.
		crashes bool
	}{
		{name: "error", fault: func() error { return errors.New(secret) }},
		{name: "wrapped error", fault: func() error { return fmt.Errorf("pebble: iterate: %w", errors.New(secret)) }},
		{name: "panic with a string", crashes: true, fault: func() error { panic(secret) }},
		{name: "panic with an error", crashes: true, fault: func() error { panic(errors.New(secret)) }},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, f := range faults {
			t.Run(f.name, func(t *testing.T) {
				var shared *faultyServer
				if !f.crashes {
					shared = startFaultyServer(t, b, f.fault)
				}
				for _, rc := range readCalls {
					t.Run(rc.name, func(t *testing.T) {
						if f.crashes {
							inChildProcess(t, func(t *testing.T) { startFaultyServer(t, b, f.fault).requireInternalOnce(t, rc) })
							return
						}
						shared.requireInternalOnce(t, rc)
					})
				}
			})
		}
	})
}

// faultyServer is a server, seeded by seedEveryKind, whose next Query
// below it fails with fault once armed.
type faultyServer struct {
	h     *harness
	armed atomic.Bool
}

func startFaultyServer(t *testing.T, b backend, fault func() error) *faultyServer {
	t.Helper()
	s := &faultyServer{}
	s.h = startServer(t, hookQuery(b.open(t), func(ctx context.Context, next func() (store.Page, error)) (store.Page, error) {
		if s.armed.CompareAndSwap(true, false) {
			return store.Page{}, fault()
		}
		return next()
	}))
	seedEveryKind(t, s.h)
	return s
}

// requireInternalOnce arms the fault and checks that rc gets INTERNAL
// without the detail, that the log gets it, and that the next call and
// the health check are served.
func (s *faultyServer) requireInternalOnce(t *testing.T, rc readCall) {
	t.Helper()
	logged := len(s.h.logs.String())
	s.armed.Store(true)
	requireInternalWithoutDetail(t, rc.call(t.Context(), s.h))
	if logs := s.h.logs.String(); !strings.Contains(logs[logged:], secret) {
		t.Errorf("log lacks the internal detail %q:\n%s", secret, logs[logged:])
	}
	requireOK(t, rc.call(t.Context(), s.h), "the call after the failed one")
	requireServing(t, s.h, "")
}

// seedEveryKind gives cam-1 a clear-day image of correlation id pano-1 of
// every kind.
func seedEveryKind(t *testing.T, h *harness) {
	t.Helper()
	img := sample("cam-1", minute(1))
	img.IsClearDay, img.CorrelationID = true, "pano-1"
	for _, k := range kinds {
		mustCreate(t, k.client(h), img)
	}
}

// requireInternalWithoutDetail fails unless err is INTERNAL "internal
// error" with nothing of the secret anywhere in the status.
func requireInternalWithoutDetail(t *testing.T, err error) {
	t.Helper()
	st := requireCode(t, err, codes.Internal)
	if st.Message() != "internal error" {
		t.Errorf("message %q, want %q", st.Message(), "internal error")
	}
	if sent := prototext.Format(st.Proto()); strings.Contains(sent, "secret") || len(st.Details()) != 0 {
		t.Errorf("status sent to the client carries internal detail: %s", sent)
	}
}

// requireServing fails unless the health service reports service SERVING.
func requireServing(t *testing.T, h *harness, service string) {
	t.Helper()
	resp, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
	requireOK(t, err, fmt.Sprintf("health check of %q", service))
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health of %q is %v, want SERVING", service, resp.GetStatus())
	}
}

// childTestEnv names, in a child test process, the test it is to run.
const childTestEnv = "METADATAD_SERVER_TEST_CHILD"

// inChildProcess runs body in a child process of the test binary that runs
// only this test, and fails if the child fails or dies.
func inChildProcess(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	if os.Getenv(childTestEnv) == t.Name() {
		body(t)
		return
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childTestEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child test process failed or died (%v); a panic the server does not recover kills the daemon:\n%s", err, out)
	}
	if reason, skipped := childSkipReason(string(out), t.Name()); skipped {
		t.Skipf("child test process skipped: %s", reason)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("child test process did not run %s:\n%s", t.Name(), out)
	}
}

// childSkipReason reports whether the verbose output of a child test
// process says the test name skipped, and what the test logged (its
// reason): a child that skips, for want of Azurite, skips its parent rather
// than failing it.
func childSkipReason(out, name string) (string, bool) {
	if !strings.Contains(out, "--- SKIP: "+name+" ") {
		return "", false
	}
	var logged []string
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if line != "=== RUN   "+name {
			continue
		}
		for _, l := range lines[i+1:] {
			trimmed := strings.TrimSpace(l)
			if !strings.HasPrefix(l, " ") || strings.HasPrefix(trimmed, "--- ") {
				break
			}
			logged = append(logged, trimmed)
		}
	}
	return strings.Join(logged, " "), true
}

// TestClockStepBackDuringStartPurge: a cutoff that was not in the future
// when StartPurge checked it is by the time the engine records the job, as
// when the wall clock steps back in between. The engine's ErrFutureCutoff
// is then INVALID_ARGUMENT, a bad cutoff, not an INTERNAL error.
func TestClockStepBackDuringStartPurge(t *testing.T) {
	var steppedBack atomic.Bool
	var reads atomic.Int64
	now := func() time.Time {
		if steppedBack.Load() && reads.Add(1) > 1 {
			return base.Add(-48 * time.Hour)
		}
		return base
	}
	h := startServerOpts(t, openMemPebble(t), serverOpts{now: now})
	steppedBack.Store(true)
	// A day back, the floor: the edge's check passes, the engine's not.
	_, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(base.Add(-24 * time.Hour))}})
	st := requireCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), "in the future") {
		t.Errorf("INVALID_ARGUMENT %q does not say the cutoff is in the future", st.Message())
	}
}
