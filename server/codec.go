package server

import (
	"context"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	protoapi "google.golang.org/protobuf/proto"
)

// requestCodec is gRPC's proto codec, except that a request that does not
// decode (invalid UTF-8 in a string, truncated or garbage bytes) is
// remembered instead of failed: grpc-go turns any codec error into INTERNAL,
// while a malformed request is the client's fault. refuseUndecodable, the
// interceptor that sees every decoded request, answers it INVALID_ARGUMENT.
type requestCodec struct {
	encoding.CodecV2
	// undecodable holds, per request message the codec failed to decode,
	// why; each entry lives from the decode to its interceptor.
	undecodable sync.Map
}

func newRequestCodec() *requestCodec {
	return &requestCodec{CodecV2: encoding.GetCodecV2(proto.Name)}
}

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(protoapi.Message)
	if !ok {
		return err
	}
	protoapi.Reset(m)
	c.undecodable.Store(v, err)
	return nil
}

// maxEchoBytes bounds what an error sent back quotes of a request: the
// decoder's reason for refusing it, or a value it named.
const maxEchoBytes = 200

// refusal is INVALID_ARGUMENT when req is one the codec failed to decode.
func (c *requestCodec) refusal(req any) error {
	why, ok := c.undecodable.LoadAndDelete(req)
	if !ok {
		return nil
	}
	name := "request"
	if m, ok := req.(protoapi.Message); ok {
		name = string(m.ProtoReflect().Descriptor().FullName())
	}
	return status.Error(codes.InvalidArgument, fmt.Sprintf("the request is not a valid %s message: %s", name, bounded(why.(error).Error(), maxEchoBytes)))
}

func (c *requestCodec) unaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.refusal(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// forgetUnary drops the codec's note of req once its call ends, however it
// ends: a call refused before unaryInterceptor (by the guard, a rate limit)
// would otherwise leave it behind.
func (c *requestCodec) forgetUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	defer c.undecodable.Delete(req)
	return handler(ctx, req)
}

func (c *requestCodec) streamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &refusingStream{ServerStream: ss, codec: c})
}

// refusingStream refuses the stream's requests that did not decode.
type refusingStream struct {
	grpc.ServerStream
	codec *requestCodec
}

func (s *refusingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.codec.refusal(m)
}

// bounded is s cut to at most limit bytes (on a rune boundary), marked "…"
// when cut: client input echoed in an error never makes it unbounded.
func bounded(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
