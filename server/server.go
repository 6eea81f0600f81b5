package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/reflect/protoregistry"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server/auth"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/video"
	"github.com/metadatad/metadatad/store/watchfeed"
)

// streamWorkers is the server's pool of call goroutines. grpc-go suggests
// one per CPU, for calls that compute; a create instead waits for its
// fsync most of its time, so with one per CPU nearly every call of a
// fleet's 16-64 concurrent writers overflowed the pool into a fresh
// goroutine, and growing those stacks was 19% of the CPU of
// BenchmarkCreateParallel. With 256 waiting workers (their grown stacks,
// about 8 MiB in all) a create costs 12% less CPU, client side included.
const streamWorkers = 256

// Options configures New.
type Options struct {
	// Single, Pano and PreStitch serve the three image services; all required.
	Single, Pano, PreStitch *images.Repository
	// Retention serves the RetentionService; nil leaves it out.
	Retention *retention.Engine
	// Video serves the VideoMetadataService; nil leaves it out.
	Video *video.Repository
	// Devices serves the DeviceStateService; nil leaves it out.
	Devices *devices.Repository
	// Fleet serves the FleetService, a view per image kind; nil leaves it out.
	Fleet map[images.Kind]*fleet.View
	// Acquisition serves the AcquisitionInstanceService; nil leaves it out.
	Acquisition *acquisition.Repository
	// Backups takes the snapshots AdminService.Backup streams; nil (on
	// Azure) makes Backup fail with FAILED_PRECONDITION saying why.
	Backups *backup.Source
	// MinRetentionDays is the smallest retention_days StartPurge accepts,
	// and how many days before now its cutoff_time must be; 0 means 1.
	MinRetentionDays int32
	// RetentionSchedule is the built-in schedule this process runs, which
	// GetRetentionSchedule reports; zero for none.
	RetentionSchedule retention.Schedule
	// StoreCheck reads from the store; while it fails, health reports
	// NOT_SERVING for the server and every service. Nil: always reachable.
	StoreCheck func(ctx context.Context) error
	// WriteCheck tells whether the store accepts writes (free space); while
	// it fails, health reports NOT_SERVING for WritesHealthService. Nil:
	// always.
	WriteCheck func() error
	// BudgetCheck tells whether the storage budget can keep the store
	// under its bytes; while it fails, health reports NOT_SERVING for
	// BudgetHealthService. Nil: no budget, SERVING.
	BudgetCheck func() error
	// HealthInterval is how often the checks run; 0 means 5 s.
	HealthInterval time.Duration
	// Logger receives a line per call that fails, and per successful call
	// AccessLog samples, naming its principal, and the detail of internal
	// errors; nil means slog.Default.
	Logger *slog.Logger
	// AccessLog is the fraction of successful calls that get a log line,
	// 0 (none) to 1 (every one); calls that fail always get one, but for
	// refusals (UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED),
	// whose lines are rate-limited per code and counted; health checks
	// never.
	AccessLog float64
	// Auth authenticates callers, who then need the scope each method
	// declares. Nil lets anyone call anything as the principal "anonymous",
	// for development on a loopback address.
	Auth *auth.Authenticator
	// OpenReflection serves reflection to callers without metadata.read.
	OpenReflection bool
	// Credentials secure connections, with TLS; nil serves plaintext.
	Credentials credentials.TransportCredentials
	// Limits bound what callers can ask of the server.
	Limits Limits
	// Metrics counts every call by method and code and times it; nil
	// leaves metrics out. Its series are pre-initialised for every method.
	Metrics *grpcprom.ServerMetrics
	// Traffic, if set, records the calls of the data plane as they begin,
	// for the purges to yield to (retention.Options.Live).
	Traffic *Traffic
	// Watch configures the image services' Watch RPCs.
	Watch WatchOptions
	// TracerProvider makes a server span of every call but health checks,
	// continuing the caller's trace; nil leaves tracing out.
	TracerProvider trace.TracerProvider
}

// Server is the gRPC server of metadatad with every service, health and
// reflection registered.
type Server struct {
	grpc    *grpc.Server
	health  *health.Server
	checker *healthChecker
	// probes serves only health, for probes that speak neither TLS nor tokens.
	probes *grpc.Server
	// stopping is closed when Shutdown begins, to end streams that would
	// otherwise stay open until the client leaves.
	stopping chan struct{}
	stopOnce sync.Once
	// feeds stream new images to the Watch RPCs; Serve runs their tails.
	feeds []*watchfeed.Feed
	// limits are the caps of every call, and their counts of open streams.
	limits *callLimits
}

// OpenStreams are the streams open now, as the caps count them.
type OpenStreams struct {
	// PurgeWatches are WatchPurge streams, Feeds the live image feeds
	// (Watch{Single,Pano,PreStitch}ImageMetadata), DeletedImageWatches
	// WatchDeletedImages streams.
	PurgeWatches, Feeds, DeletedImageWatches int64
}

// OpenStreams reports the streams open now, for the metrics.
func (s *Server) OpenStreams() OpenStreams {
	return OpenStreams{PurgeWatches: s.limits.watches.Load(), Feeds: s.limits.feeds.Load(), DeletedImageWatches: s.limits.deleted.Load()}
}

// New builds the server and its interceptor chain. It refuses a service
// method that declares no required scope.
func New(opts Options) (*Server, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	// stopping ends open streams when Shutdown begins.
	stopping := make(chan struct{})
	feeds := make([]*watchfeed.Feed, 0, 3)
	for _, repo := range []*images.Repository{opts.Single, opts.Pano, opts.PreStitch} {
		f, err := watchfeed.New(watchfeed.Options{Repo: repo, Poll: opts.Watch.Poll, Window: opts.Watch.Window,
			Buffer: opts.Watch.Buffer, MaxResumeAge: opts.Watch.MaxResumeAge, Now: opts.Watch.Now, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("server: %s feed: %w", repo.Kind(), err)
		}
		feeds = append(feeds, f)
	}
	services := opts.services(feeds, stopping)
	// The scopes are read from the descriptors before the server exists, as
	// its interceptors are fixed when it is made; the check after
	// registering catches a service registered some other way.
	scopes, err := methodScopes(serviceInfo(services), opts.OpenReflection, protoregistry.GlobalFiles)
	if err != nil {
		return nil, err
	}
	limits := newCallLimits(opts.Limits)
	s := &Server{grpc: grpc.NewServer(opts.serverOptions(scopes, limits)...), health: health.NewServer(), stopping: stopping, feeds: feeds, limits: limits}
	s.checker = &healthChecker{health: s.health, store: opts.StoreCheck, writes: opts.WriteCheck, budget: opts.BudgetCheck,
		interval: opts.HealthInterval, log: opts.Logger, reachable: true}
	for _, svc := range services {
		s.grpc.RegisterService(svc.desc, svc.impl)
		s.checker.services = append(s.checker.services, svc.desc.ServiceName)
	}
	s.checker.check(context.Background())
	healthpb.RegisterHealthServer(s.grpc, drainingHealth{s.health, stopping})
	s.probes = grpc.NewServer()
	healthpb.RegisterHealthServer(s.probes, drainingHealth{s.health, stopping})
	reflection.Register(s.grpc)
	for name, info := range s.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			if _, ok := scopes["/"+name+"/"+m.Name]; !ok {
				return nil, fmt.Errorf("server: /%s/%s has no scope; every method needs one", name, m.Name)
			}
		}
	}
	if opts.Metrics != nil {
		opts.Metrics.InitializeMetrics(s.grpc)
	}
	return s, nil
}

// fill checks the options and puts in the defaults of those left zero:
// the one place New's defaults are set.
func (o *Options) fill() error {
	if o.Single == nil || o.Pano == nil || o.PreStitch == nil {
		return errors.New("server: Options needs the Single, Pano and PreStitch repositories")
	}
	for _, kind := range images.Kinds {
		if o.Fleet != nil && o.Fleet[kind] == nil {
			return fmt.Errorf("server: Options.Fleet needs a view of every image kind; %s has none", kind)
		}
	}
	if o.AccessLog < 0 || o.AccessLog > 1 {
		return fmt.Errorf("server: Options.AccessLog is a fraction, 0 to 1, not %g", o.AccessLog)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinRetentionDays <= 0 {
		o.MinRetentionDays = 1
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = defaultHealthInterval
	}
	o.Limits.fill()
	return nil
}

// services are the services the options ask for, the image services
// with their feeds.
func (o *Options) services(feeds []*watchfeed.Feed, stopping chan struct{}) []service {
	log := o.Logger
	services := []service{
		{&metadatav1.SingleImageMetadataService_ServiceDesc, &singleImageService{
			h: &imageHandler[*metadatav1.SingleImageMetadata]{repo: o.Single, log: log, feed: feeds[0], stopping: stopping, fromImage: singleImageFromImage}}},
		{&metadatav1.PanoImageMetadataService_ServiceDesc, &panoImageService{
			h: &imageHandler[*metadatav1.PanoImageMetadata]{repo: o.Pano, log: log, feed: feeds[1], stopping: stopping, fromImage: panoImageFromImage}}},
		{&metadatav1.PreStitchImageMetadataService_ServiceDesc, &preStitchImageService{
			h: &imageHandler[*metadatav1.PreStitchImageMetadata]{repo: o.PreStitch, log: log, feed: feeds[2], stopping: stopping, fromImage: preStitchImageFromImage}}},
		{&metadatav1.AdminService_ServiceDesc, &adminService{backups: o.Backups, log: log, stopping: stopping}},
	}
	if o.Retention != nil {
		services = append(services, service{&metadatav1.RetentionService_ServiceDesc, &retentionService{
			engine: o.Retention, minDays: o.MinRetentionDays, schedule: o.RetentionSchedule, log: log, stopping: stopping}})
	}
	if o.Video != nil {
		services = append(services, service{&metadatav1.VideoMetadataService_ServiceDesc, &videoService{repo: o.Video, log: log}})
	}
	if o.Devices != nil {
		services = append(services, service{&metadatav1.DeviceStateService_ServiceDesc, &deviceStateService{repo: o.Devices, log: log}})
	}
	if o.Fleet != nil {
		services = append(services, service{&metadatav1.FleetService_ServiceDesc, &fleetService{views: o.Fleet, log: log}})
	}
	if o.Acquisition != nil {
		services = append(services, service{&metadatav1.AcquisitionInstanceService_ServiceDesc, &acquisitionInstanceService{repo: o.Acquisition, log: log}})
	}
	return services
}

// serverOptions are the grpc.Server's options: the interceptor chain
// guarding each method with its scope, limits, workers, tracing and TLS.
func (o *Options) serverOptions(scopes map[string]string, limits *callLimits) []grpc.ServerOption {
	var opts []grpc.ServerOption
	if o.Metrics != nil {
		// Outermost, so every call is counted whatever refuses it later.
		opts = append(opts, grpc.ChainUnaryInterceptor(o.Metrics.UnaryServerInterceptor()),
			grpc.ChainStreamInterceptor(o.Metrics.StreamServerInterceptor()))
	}
	if o.Traffic != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(o.Traffic.unary), grpc.ChainStreamInterceptor(o.Traffic.stream))
	}
	opts = append(opts, interceptorChain(newCallLog(o.Logger, o.AccessLog), auth.NewGuard(o.Auth, scopes).Authorize, limits)...)
	opts = append(opts, o.Limits.serverOptions()...)
	// A fixed pool of goroutines serves the calls instead of a new goroutine
	// per call, whose stack grows anew each time. A call that finds every
	// worker busy still gets a goroutine of its own; see streamWorkers.
	opts = append(opts, grpc.NumStreamWorkers(streamWorkers))
	if o.TracerProvider != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(o.TracerProvider),
			otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))))
	}
	if o.Credentials != nil {
		opts = append(opts, grpc.Creds(o.Credentials))
	}
	return opts
}

// service is one service to register: its description and implementation.
type service struct {
	desc *grpc.ServiceDesc
	impl any
}

// serviceInfo describes services, and the health and reflection services
// New adds, as grpc.Server.GetServiceInfo would once they are registered.
func serviceInfo(services []service) map[string]grpc.ServiceInfo {
	descs := []*grpc.ServiceDesc{
		&healthpb.Health_ServiceDesc,
		&reflectionv1.ServerReflection_ServiceDesc,
		&reflectionv1alpha.ServerReflection_ServiceDesc,
	}
	for _, svc := range services {
		descs = append(descs, svc.desc)
	}
	infos := make(map[string]grpc.ServiceInfo, len(descs))
	for _, d := range descs {
		var methods []grpc.MethodInfo
		for _, m := range d.Methods {
			methods = append(methods, grpc.MethodInfo{Name: m.MethodName})
		}
		for _, st := range d.Streams {
			methods = append(methods, grpc.MethodInfo{Name: st.StreamName, IsClientStream: st.ClientStreams, IsServerStream: st.ServerStreams})
		}
		infos[d.ServiceName] = grpc.ServiceInfo{Methods: methods}
	}
	return infos
}

// Serve accepts connections on lis until Shutdown, keeping the health
// statuses in step with the store and tailing the store for the Watch RPCs
// meanwhile.
func (s *Server) Serve(lis net.Listener) error {
	ctx, stopChecks := context.WithCancel(context.Background())
	var background sync.WaitGroup
	background.Go(func() { s.checker.run(ctx) })
	for _, f := range s.feeds {
		background.Go(func() { f.Run(ctx) })
	}
	err := s.grpc.Serve(lis)
	stopChecks()
	background.Wait()
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// ErrCallsStuck reports calls still running when Shutdown returned: they
// went on after their context was cancelled, stuck in the store. The caller
// must not close the store under them.
var ErrCallsStuck = errors.New("server: calls still running after shutdown cut them off")

// stopGrace is the part of Shutdown's time kept for calls to return once cut
// off: a call that honours its context returns within it.
const stopGrace = 250 * time.Millisecond

// Shutdown reports NOT_SERVING to health checks, ends open health,
// WatchPurge and image Watch streams with UNAVAILABLE, stops accepting calls and waits for the calls in
// flight. Shortly before ctx ends it cuts them off; it returns by the time
// ctx ends, with ErrCallsStuck if some calls still run.
func (s *Server) Shutdown(ctx context.Context) error {
	s.health.Shutdown()
	// Probes see NOT_SERVING throughout the drain, and stop with it.
	defer s.probes.Stop()
	s.stopOnce.Do(func() { close(s.stopping) })
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	cut, cancel := ctx, context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		cut, cancel = context.WithDeadline(ctx, deadline.Add(-stopGrace))
	}
	defer cancel()
	select {
	case <-done:
		return nil
	case <-cut.Done():
	}
	s.grpc.Stop()
	// GracefulStop returns once every call has: a call that ignores its
	// cancelled context would hold it, and the process, forever.
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	select {
	case <-done:
		return nil
	default:
		return ErrCallsStuck
	}
}
