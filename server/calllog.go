package server

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/server/auth"
)

// callLog writes one line per finished call but health checks (probes
// would drown the log) and the successful calls its sample leaves out, at
// the level its code deserves (logging.DefaultServerCodeToLevel: OK and
// client errors at info, refusals at warn, server faults at error), naming
// the principal. A call that fails always has its line: at a thousand
// creates a second, a line for each success is gigabytes a day.
//
// It replaces go-grpc-middleware's logging interceptor on the hot path,
// which builds its fields (a dozen small allocations and a formatted start
// time) before it knows whether the logger keeps the line: here a call
// whose line the level drops costs one clock read and nothing else.
type callLog struct {
	log *slog.Logger
	// successes is the fraction of successful calls logged, 0 to 1.
	successes float64
}

func (c callLog) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if isHealth(info.FullMethod) {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	c.finished(ctx, info.FullMethod, "unary", start, err)
	return resp, err
}

func (c callLog) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if isHealth(info.FullMethod) {
		return handler(srv, ss)
	}
	start := time.Now()
	err := handler(srv, ss)
	kind := "server_stream"
	switch {
	case info.IsClientStream && info.IsServerStream:
		kind = "bidi_stream"
	case info.IsClientStream:
		kind = "client_stream"
	}
	c.finished(ss.Context(), info.FullMethod, kind, start, err)
	return err
}

// finished logs the call's line if the logger keeps its level.
func (c callLog) finished(ctx context.Context, fullMethod, kind string, start time.Time, err error) {
	code := status.Code(err)
	if code == codes.OK && (c.successes <= 0 || c.successes < 1 && rand.Float64() >= c.successes) {
		return
	}
	level := slog.Level(logging.DefaultServerCodeToLevel(code))
	if !c.log.Enabled(ctx, level) {
		return
	}
	service, method := splitMethod(fullMethod)
	principal := auth.CallerName(ctx)
	if principal == "" {
		principal = "-"
	}
	attrs := []slog.Attr{
		slog.String("grpc.service", service),
		slog.String("grpc.method", method),
		slog.String("grpc.method_type", kind),
		slog.String("principal", principal),
		slog.String("grpc.code", code.String()),
		slog.Float64("grpc.time_ms", float64(time.Since(start).Microseconds())/1000),
	}
	if err != nil {
		attrs = append(attrs, slog.String("grpc.error", status.Convert(err).Message()))
	}
	c.log.LogAttrs(ctx, level, "finished call", attrs...)
}

// healthPrefix begins the full name of every health method.
var healthPrefix = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"

func isHealth(fullMethod string) bool { return strings.HasPrefix(fullMethod, healthPrefix) }

// splitMethod splits "/package.Service/Method" into its service and method.
func splitMethod(fullMethod string) (service, method string) {
	fullMethod = strings.TrimPrefix(fullMethod, "/")
	if i := strings.LastIndexByte(fullMethod, '/'); i >= 0 {
		return fullMethod[:i], fullMethod[i+1:]
	}
	return "unknown", fullMethod
}
