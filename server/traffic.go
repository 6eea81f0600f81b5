package server

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// LiveWindow is how long after a call begins the server still counts as
// serving requests (Traffic.Live): long enough to span the gaps between a
// steady fleet's calls, short enough that a purge on a store gone quiet
// soon runs at full speed.
const LiveWindow = time.Second

// Traffic records when the server last began a call of the data plane, so
// that background work (a purge) can yield to the requests it would slow.
// Health probes and RetentionService calls are not traffic: a probe comes
// every few seconds whether or not anyone is served, and a purge is started
// and watched through RetentionService itself. The zero value is ready; its
// clock is time.Now unless Now is set.
type Traffic struct {
	// Now is the clock; nil means time.Now.
	Now  func() time.Time
	last atomic.Int64 // unix nanoseconds of the last call begun; 0: none
}

// Live reports whether a call of the data plane began within LiveWindow.
func (t *Traffic) Live() bool {
	last := t.last.Load()
	return last != 0 && t.now().UnixNano()-last < int64(LiveWindow)
}

func (t *Traffic) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// mark records a call of method, unless it is not traffic (see Traffic).
func (t *Traffic) mark(method string) {
	if strings.HasPrefix(method, "/"+healthpb.Health_ServiceDesc.ServiceName+"/") ||
		strings.HasPrefix(method, "/"+metadatav1.RetentionService_ServiceDesc.ServiceName+"/") {
		return
	}
	t.last.Store(t.now().UnixNano())
}

func (t *Traffic) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	t.mark(info.FullMethod)
	return handler(ctx, req)
}

func (t *Traffic) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	t.mark(info.FullMethod)
	return handler(srv, ss)
}
