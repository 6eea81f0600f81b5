package server

import (
	"context"
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
//
//  1. room for the caller's name, so that the log line, written outside
//     the guard, can name the principal;
//  2. logging (skipping health probes, which would drown the log);
//  3. admission, before anything costs work: the cap on calls in flight
//     (and on open watches and feeds), then, with a rate limit, the
//     budget of failed authentications of the caller's peer address, and
//     the default deadline. A flood of calls with bad tokens is refused
//     here with RESOURCE_EXHAUSTED, without a JWT verified for it;
//  4. the guard, which authenticates the caller and checks its scope, so
//     a caller without credentials learns nothing about its request; a
//     call it finds unauthenticated takes from its peer's budget;
//  5. the principal's rate, which needs the principal the guard named
//     (with no rate set, not in the chain);
//  6. the refusal of requests that did not decode;
//  7. recovery, innermost, so a panic becomes an INTERNAL status that the
//     logging interceptor still records.
//
// Health is exempt from 3 and 5, so probes answer under load. The chain
// also installs the codec whose failed decodes are refused, and, ahead of
// admission, drops the codec's note of a request refused before 6.
func interceptorChain(calls callLog, authorize grpcauth.AuthFunc, limits *callLimits) []grpc.ServerOption {
	log := calls.log
	authorize = limits.authorize(authorize)
	codec := newRequestCodec()
	notHealth := selector.MatchFunc(func(_ context.Context, call interceptors.CallMeta) bool {
		return call.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	recoverOpts := []recovery.Option{recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic serving call", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})}
	unary := []grpc.UnaryServerInterceptor{
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(auth.WithCaller(ctx), req)
		},
		calls.unary,
		codec.forgetUnary,
		selector.UnaryServerInterceptor(limits.unary, notHealth),
		grpcauth.UnaryServerInterceptor(authorize),
	}
	stream := []grpc.StreamServerInterceptor{
		func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			wrapped := middleware.WrapServerStream(ss)
			wrapped.WrappedContext = auth.WithCaller(ss.Context())
			return handler(srv, wrapped)
		},
		calls.stream,
		selector.StreamServerInterceptor(limits.stream, notHealth),
		grpcauth.StreamServerInterceptor(authorize),
	}
	// Without a rate the principal's limiter would admit every call: it is
	// left out, so that a feature off costs a call nothing.
	if limits.rated() {
		unary = append(unary, selector.UnaryServerInterceptor(ratelimit.UnaryServerInterceptor(limits), notHealth))
		stream = append(stream, selector.StreamServerInterceptor(ratelimit.StreamServerInterceptor(limits), notHealth))
	}
	unary = append(unary, codec.unaryInterceptor, recovery.UnaryServerInterceptor(recoverOpts...))
	stream = append(stream, codec.streamInterceptor, recovery.StreamServerInterceptor(recoverOpts...))
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}
}
