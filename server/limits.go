package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
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
	// RESOURCE_EXHAUSTED. 0 means no rate limit.
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

// callLimits enforces the per-call limits: rate per principal, calls in
// flight, open watches and feeds, and the default deadline.
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

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

func newCallLimits(l Limits) *callLimits {
	return &callLimits{limits: l, limiters: map[string]*rate.Limiter{}}
}

// feeds are the methods of the live image feeds.
var feeds = map[string]bool{
	metadatav1.SingleImageMetadataService_WatchSingleImageMetadata_FullMethodName:       true,
	metadatav1.PanoImageMetadataService_WatchPanoImageMetadata_FullMethodName:           true,
	metadatav1.PreStitchImageMetadataService_WatchPreStitchImageMetadata_FullMethodName: true,
}

// Limit is the ratelimit.Limiter of the calling principal's rate: the
// interceptor turns its error into RESOURCE_EXHAUSTED. It runs after the
// guard, which names the principal.
func (c *callLimits) Limit(ctx context.Context) error {
	if c.limits.Rate <= 0 {
		return nil
	}
	p, _ := auth.FromContext(ctx)
	c.mu.Lock()
	l, ok := c.limiters[p.Name]
	if !ok {
		l = rate.NewLimiter(rate.Limit(c.limits.Rate), c.limits.Burst)
		c.limiters[p.Name] = l
	}
	c.mu.Unlock()
	if !l.Allow() {
		return fmt.Errorf("%s is over its rate of %g calls per second", p.Name, c.limits.Rate)
	}
	return nil
}

// enter admits a call of method, or says why not; leave must follow an
// admission.
func (c *callLimits) enter(method string) (leave func(), err error) {
	leaveFlight, err := admit(&c.inFlight, c.limits.MaxInFlight, "server busy: %d calls in flight; retry with backoff")
	if err != nil {
		return nil, err
	}
	var leaveStream func()
	switch {
	case method == metadatav1.RetentionService_WatchPurge_FullMethodName:
		leaveStream, err = admit(&c.watches, c.limits.MaxWatches, "%d WatchPurge streams already open; poll GetPurge instead")
	case feeds[method]:
		leaveStream, err = admit(&c.feeds, c.limits.MaxFeeds, "%d image feeds already open; retry with backoff, or watch more cameras per stream")
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
	leave, err := c.enter(info.FullMethod)
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
	leave, err := c.enter(info.FullMethod)
	if err != nil {
		return err
	}
	defer leave()
	return handler(srv, ss)
}
