package server

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// LiveWindow is how long after a call begins the server still counts as
// serving requests (Traffic.Live): long enough to span the gaps between a
// steady fleet's calls, short enough that a purge on a store gone quiet
// soon runs at full speed.
const LiveWindow = time.Second

// Traffic records when the server last began a call of the data plane, so
// that background work (a purge) can yield to the requests it would slow.
// The data plane is the services of the fleet's images, videos, device
// states and acquisition runs (dataPlane), and nothing else: a health probe
// comes every few seconds whether or not anyone is served, a purge is
// started and watched through RetentionService itself, an operator's
// grpcurl asks the reflection service before every call, and a backup
// streams through AdminService; none of them should slow the purge that
// keeps the store in bounds. The zero value is ready; its clock is time.Now
// unless Now is set.
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

// dataPlane are the services whose calls are traffic (see Traffic).
var dataPlane = map[string]bool{
	metadatav1.SingleImageMetadataService_ServiceDesc.ServiceName:    true,
	metadatav1.PanoImageMetadataService_ServiceDesc.ServiceName:      true,
	metadatav1.PreStitchImageMetadataService_ServiceDesc.ServiceName: true,
	metadatav1.VideoMetadataService_ServiceDesc.ServiceName:          true,
	metadatav1.DeviceStateService_ServiceDesc.ServiceName:            true,
	metadatav1.AcquisitionInstanceService_ServiceDesc.ServiceName:    true,
}

// mark records a call of method ("/service/method") if it is traffic.
func (t *Traffic) mark(method string) {
	service, _, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if dataPlane[service] {
		t.last.Store(t.now().UnixNano())
	}
}

func (t *Traffic) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	t.mark(info.FullMethod)
	return handler(ctx, req)
}

func (t *Traffic) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	t.mark(info.FullMethod)
	return handler(srv, ss)
}
