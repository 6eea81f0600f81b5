package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server/auth"
)

// Limits bound what callers can ask of the server, so that one caller or a
// burst cannot queue work without bound. Zero fields take the defaults
// documented on each; health checks are exempt from the call limits.
type Limits struct {
	// MaxRequestBytes is the largest request message accepted; a larger one
	// is RESOURCE_EXHAUSTED. 0 means 4 MiB.
	MaxRequestBytes int
	// MaxConcurrentStreams bounds the calls one connection may have open.
	// 0 means 256.
	MaxConcurrentStreams uint32
	// MaxConnectionAge closes a connection (after its calls finish, within a
	// grace of a minute) once it is this old, so clients reconnect: to
	// another replica, and with the server's current certificate. 0 means
	// 30 minutes.
	MaxConnectionAge time.Duration
	// DefaultDeadline bounds a unary call whose client set no deadline. 0
	// means a minute.
	DefaultDeadline time.Duration
	// Rate is the calls per second each principal may make, with bursts of
	// Burst (0 means Rate, at least 1); beyond it calls are
	// RESOURCE_EXHAUSTED. 0 means no rate limit. It is also the rate of
	// failed authentications a peer address may cause: past that budget
	// the peer's calls are RESOURCE_EXHAUSTED before their credentials are
	// checked.
	Rate  float64
	Burst int
	// MaxInFlight is how many calls the server runs at once; one more is
	// RESOURCE_EXHAUSTED rather than queued. 0 means 1,024.
	MaxInFlight int
	// MaxWatches is how many WatchPurge streams may be open at once. 0
	// means 64.
	MaxWatches int
	// MaxFeeds is how many live image feeds (Watch{Single,Pano,PreStitch}
	// ImageMetadata streams) may be open at once. 0 means 256.
	MaxFeeds int
	// MaxDeletedImageWatches is how many WatchDeletedImages streams may be
	// open at once. 0 means 16: their readers are a few blob cleaners.
	MaxDeletedImageWatches int
}

func (l *Limits) fill() {
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = 4 << 20
	}
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = 256
	}
	if l.MaxConnectionAge <= 0 {
		l.MaxConnectionAge = 30 * time.Minute
	}
	if l.DefaultDeadline <= 0 {
		l.DefaultDeadline = time.Minute
	}
	if l.Burst <= 0 {
		l.Burst = max(1, int(l.Rate))
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = 1024
	}
	if l.MaxWatches <= 0 {
		l.MaxWatches = 64
	}
	if l.MaxFeeds <= 0 {
		l.MaxFeeds = 256
	}
	if l.MaxDeletedImageWatches <= 0 {
		l.MaxDeletedImageWatches = 16
	}
}

// serverOptions are the grpc.Server options enforcing l on connections.
func (l Limits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(l.MaxRequestBytes),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      l.MaxConnectionAge,
			MaxConnectionAgeGrace: time.Minute,
			Time:                  time.Minute,
			Timeout:               20 * time.Second,
		}),
		// Clients may ping every 10 s, also between calls; more often is
		// abuse and closes the connection.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// callLimits enforces the per-call limits: calls in flight, open watches
// (of purges and of deleted images) and feeds, failed authentications per
// peer address and the default deadline before the guard authenticates,
// the rate per principal after.
//
// A watch or a feed is a stream that stays open for as long as its client
// wants: besides the calls in flight it counts against a cap of its own,
// far below MaxInFlight by default, so that open streams cannot take every
// place of the calls that do work.
type callLimits struct {
	limits   Limits
	inFlight atomic.Int64
	watches  atomic.Int64
	feeds    atomic.Int64
	deleted  atomic.Int64

	// principals and peers are nil without a rate limit. peers only
	// counts failed authentications, so callers whose credentials are good
	// never lose calls to others behind the same address (a proxy, a NAT).
	principals, peers *keyedLimiters
}

func newCallLimits(l Limits) *callLimits {
	c := &callLimits{limits: l}
	if l.Rate > 0 {
		c.principals = newKeyedLimiters(l.Rate, l.Burst, maxLimiters)
		c.peers = newKeyedLimiters(l.Rate, l.Burst, maxLimiters)
	}
	return c
}

// feeds are the methods of the live image feeds.
var feeds = map[string]bool{
	metadatav1.SingleImageMetadataService_WatchSingleImageMetadata_FullMethodName:       true,
	metadatav1.PanoImageMetadataService_WatchPanoImageMetadata_FullMethodName:           true,
	metadatav1.PreStitchImageMetadataService_WatchPreStitchImageMetadata_FullMethodName: true,
}

// rated reports whether calls have a rate limit.
func (c *callLimits) rated() bool { return c.principals != nil }

// Limit is the ratelimit.Limiter of the calling principal's rate: the
// interceptor turns its error into RESOURCE_EXHAUSTED. It runs after the
// guard, which names the principal.
func (c *callLimits) Limit(ctx context.Context) error {
	if c.principals == nil {
		return nil
	}
	p, _ := auth.FromContext(ctx)
	if !c.principals.allow(p.Name, time.Now()) {
		return fmt.Errorf("%s is over its rate of %g calls per second", p.Name, c.limits.Rate)
	}
	return nil
}

// authorize wraps the guard's AuthFunc: a call it refuses as
// UNAUTHENTICATED takes a token of its peer's budget, which enter checks
// before the next call of that peer reaches the guard.
func (c *callLimits) authorize(authorize grpcauth.AuthFunc) grpcauth.AuthFunc {
	if c.peers == nil {
		return authorize
	}
	return func(ctx context.Context) (context.Context, error) {
		authorized, err := authorize(ctx)
		if status.Code(err) == codes.Unauthenticated {
			c.peers.allow(callerAddress(ctx), time.Now())
		}
		return authorized, err
	}
}

// callerAddress is the peer key of the call in ctx.
func callerAddress(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	return peerKey(p.Addr)
}

// enter admits a call of method from the caller in ctx, or says why not;
// leave must follow an admission. It runs before the guard, so that a
// flood of calls costs no verification of credentials beyond the caps.
func (c *callLimits) enter(ctx context.Context, method string) (leave func(), err error) {
	leaveFlight, err := admit(&c.inFlight, c.limits.MaxInFlight, "server busy: %d calls in flight; retry with backoff")
	if err != nil {
		return nil, err
	}
	if c.peers != nil {
		if addr := callerAddress(ctx); c.peers.exhausted(addr, time.Now()) {
			leaveFlight()
			return nil, status.Errorf(codes.ResourceExhausted, "%s is over its rate of %g failed authentications per second; retry with backoff and valid credentials", addr, c.limits.Rate)
		}
	}
	var leaveStream func()
	switch {
	case method == metadatav1.RetentionService_WatchPurge_FullMethodName:
		leaveStream, err = admit(&c.watches, c.limits.MaxWatches, "%d WatchPurge streams already open; poll GetPurge instead")
	case feeds[method]:
		leaveStream, err = admit(&c.feeds, c.limits.MaxFeeds, "%d image feeds already open; retry with backoff, or watch more cameras per stream")
	case method == metadatav1.RetentionService_WatchDeletedImages_FullMethodName:
		leaveStream, err = admit(&c.deleted, c.limits.MaxDeletedImageWatches, "%d WatchDeletedImages streams already open; retry with backoff")
	default:
		return leaveFlight, nil
	}
	if err != nil {
		leaveFlight()
		return nil, err
	}
	return func() { leaveStream(); leaveFlight() }, nil
}

// admit takes a place of n, which may hold at most limit, or refuses with
// RESOURCE_EXHAUSTED and refusal, formatted with the limit.
func admit(n *atomic.Int64, limit int, refusal string) (leave func(), err error) {
	if n.Add(1) > int64(limit) {
		n.Add(-1)
		return nil, status.Errorf(codes.ResourceExhausted, refusal, limit)
	}
	return func() { n.Add(-1) }, nil
}

func (c *callLimits) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	leave, err := c.enter(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer leave()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.limits.DefaultDeadline)
		defer cancel()
	}
	return handler(ctx, req)
}

func (c *callLimits) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	leave, err := c.enter(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	defer leave()
	return handler(srv, ss)
}
