package server

import (
	"context"
	"log/slog"
	"runtime/debug"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/server/auth"
)

// interceptorChain is the chain every call runs through, outermost first:
// room for the caller's name, so that the log line, written outside the
// guard, can name the principal; logging (skipping health probes, which
// would drown the log); the guard, which authenticates the caller and
// checks its scope, so a caller without credentials learns nothing about
// its request; the principal's rate and the caps on calls in flight
// (health exempt, so probes answer under load); the refusal of requests
// that did not decode; then recovery, innermost, so a panic becomes an
// INTERNAL status that the logging interceptor still records. It also
// installs the codec whose failed decodes are refused, and, ahead of the
// guard, drops the codec's note of a request the guard refuses.
func interceptorChain(log *slog.Logger, guard *auth.Guard, limits *callLimits) []grpc.ServerOption {
	codec := newRequestCodec()
	calls := callLog{log: log}
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
			func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
				return handler(auth.WithCaller(ctx), req)
			},
			calls.unary,
			codec.forgetUnary,
			grpcauth.UnaryServerInterceptor(guard.Authorize),
			selector.UnaryServerInterceptor(ratelimit.UnaryServerInterceptor(limits), notHealth),
			selector.UnaryServerInterceptor(limits.unary, notHealth),
			codec.unaryInterceptor,
			recovery.UnaryServerInterceptor(recoverOpts...),
		),
		grpc.ChainStreamInterceptor(
			func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
				wrapped := middleware.WrapServerStream(ss)
				wrapped.WrappedContext = auth.WithCaller(ss.Context())
				return handler(srv, wrapped)
			},
			calls.stream,
			grpcauth.StreamServerInterceptor(guard.Authorize),
			selector.StreamServerInterceptor(ratelimit.StreamServerInterceptor(limits), notHealth),
			selector.StreamServerInterceptor(limits.stream, notHealth),
			codec.streamInterceptor,
			recovery.StreamServerInterceptor(recoverOpts...),
		),
	}
}
