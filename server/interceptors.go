package server

import (
	"context"
	"log/slog"
	"runtime/debug"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// interceptorChain is the chain every call runs through, outermost first:
// metrics, when given, so every call is counted whatever refuses it later;
// logging (skipping health probes, which would drown the log); then
// recovery, innermost, so a panic becomes an INTERNAL status that the
// logging and metrics interceptors still record.
func interceptorChain(log *slog.Logger, metrics *grpcprom.ServerMetrics) []grpc.ServerOption {
	logger := logging.LoggerFunc(func(ctx context.Context, level logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(level), msg, fields...)
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	notHealth := selector.MatchFunc(func(_ context.Context, call interceptors.CallMeta) bool {
		return call.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	recoverOpts := []recovery.Option{recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic serving call", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})}
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	if metrics != nil {
		unary = append(unary, metrics.UnaryServerInterceptor())
		stream = append(stream, metrics.StreamServerInterceptor())
	}
	unary = append(unary,
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(logger, logOpts...), notHealth),
		recovery.UnaryServerInterceptor(recoverOpts...),
	)
	stream = append(stream,
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(logger, logOpts...), notHealth),
		recovery.StreamServerInterceptor(recoverOpts...),
	)
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}
}
