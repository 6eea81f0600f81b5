package server

import (
	"context"
	"log/slog"
	"runtime/debug"

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
// logging (skipping health probes, which would drown the log), then the
// refusal of requests that did not decode, then recovery, innermost, so a
// panic becomes an INTERNAL status that the logging interceptor still
// records. It also installs the codec whose failed decodes are refused.
func interceptorChain(log *slog.Logger) []grpc.ServerOption {
	codec := newRequestCodec()
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
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(
			selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(logger, logOpts...), notHealth),
			codec.unaryInterceptor,
			recovery.UnaryServerInterceptor(recoverOpts...),
		),
		grpc.ChainStreamInterceptor(
			selector.StreamServerInterceptor(logging.StreamServerInterceptor(logger, logOpts...), notHealth),
			codec.streamInterceptor,
			recovery.StreamServerInterceptor(recoverOpts...),
		),
	}
}
