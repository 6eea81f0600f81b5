package server

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/server/auth"
)

// callLog writes one line per finished call but health checks (probes
// would drown the log), the successful calls its sample leaves out and the
// refusals past refusalLines' rate, at the level its code deserves
// (logging.DefaultServerCodeToLevel: OK and client errors at info, with
// UNAUTHENTICATED among them; PERMISSION_DENIED, RESOURCE_EXHAUSTED and the
// failed preconditions at warn; server faults at error), naming the
// principal. Any
// other call that fails always has its line: at a thousand creates a
// second, a line for each success is gigabytes a day.
//
// It replaces go-grpc-middleware's logging interceptor on the hot path,
// which builds its fields (a dozen small allocations and a formatted start
// time) before it knows whether the logger keeps the line: here a call
// whose line the level drops costs one clock read and nothing else.
type callLog struct {
	log *slog.Logger
	// successes is the fraction of successful calls logged, 0 to 1.
	successes float64
	// refusals bound the lines of refused calls; nil logs every one.
	refusals refusalLines
}

func newCallLog(log *slog.Logger, successes float64) callLog {
	return callLog{log: log, successes: successes, refusals: newRefusalLines()}
}

// Refused calls are answered before any work is done for them, so a
// caller can make them as fast as it can send: 30,000 bad tokens in 1.9 s
// wrote 10.5 MB of log. Their lines are rate-limited per code, at most
// refusalBurst at once and refusalsPerSecond after; a line that follows
// some left out says how many (refusals_unlogged), so an operator still
// sees the volume, and the metrics count every call. A count left when a
// flood stops comes with the next refusal of its code.
const (
	refusalBurst      = 20
	refusalsPerSecond = 1
)

// refusedCodes are the codes the admission, the guard and the rate limits
// answer with: a missing or bad credential, a missing scope, a cap or a
// rate exceeded (and the free-space guard's refusal of a write).
var refusedCodes = []codes.Code{codes.Unauthenticated, codes.PermissionDenied, codes.ResourceExhausted}

// refusalLines holds a budget of lines per refused code; it is built once
// and only read after, so it needs no lock.
type refusalLines map[codes.Code]*refusalBudget

type refusalBudget struct {
	lines    *rate.Limiter
	unlogged atomic.Int64
}

func newRefusalLines() refusalLines {
	r := refusalLines{}
	for _, code := range refusedCodes {
		r[code] = &refusalBudget{lines: rate.NewLimiter(refusalsPerSecond, refusalBurst)}
	}
	return r
}

// admit reports whether a call that ended with code gets its line and, if
// it does, how many refusals of code went unlogged since the last line.
func (r refusalLines) admit(code codes.Code) (ok bool, unlogged int64) {
	b := r[code]
	if b == nil {
		return true, 0
	}
	if !b.lines.Allow() {
		b.unlogged.Add(1)
		return false, 0
	}
	return true, b.unlogged.Swap(0)
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
	// A call its caller gave up on (a Watch stream closed, the reflection
	// stream grpcurl closes after every call) is no failure of the
	// server's: it is sampled as the successes are.
	gaveUp := code == codes.Canceled && ctx.Err() != nil
	if (code == codes.OK || gaveUp) && (c.successes <= 0 || c.successes < 1 && rand.Float64() >= c.successes) {
		return
	}
	level := slog.Level(logging.DefaultServerCodeToLevel(code))
	if !c.log.Enabled(ctx, level) {
		return
	}
	ok, unlogged := c.refusals.admit(code)
	if !ok {
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
	if unlogged > 0 {
		attrs = append(attrs, slog.Int64("refusals_unlogged", unlogged))
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
