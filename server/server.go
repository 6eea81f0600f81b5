package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/video"
)

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
	// Acquisition serves the AcquisitionInstanceService; nil leaves it out.
	Acquisition *acquisition.Repository
	// MinRetentionDays is the smallest retention_days StartPurge accepts; 0 means 1.
	MinRetentionDays int32
	// StoreCheck reads from the store; while it fails, health reports
	// NOT_SERVING for the server and every service. Nil: always reachable.
	StoreCheck func(ctx context.Context) error
	// WriteCheck tells whether the store accepts writes (free space); while
	// it fails, health reports NOT_SERVING for WritesHealthService. Nil:
	// always.
	WriteCheck func() error
	// HealthInterval is how often the checks run; 0 means 5 s.
	HealthInterval time.Duration
	// Logger receives one line per call and the detail of internal errors;
	// nil means slog.Default.
	Logger *slog.Logger
	// Metrics counts every call by method and code and times it; nil
	// leaves metrics out. Its series are pre-initialised for every method.
	Metrics *grpcprom.ServerMetrics
	// TracerProvider makes a server span of every call but health checks,
	// continuing the caller's trace; nil leaves tracing out.
	TracerProvider trace.TracerProvider
}

// Server is the gRPC server of metadatad with every service, health and
// reflection registered.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	// probes serves only health, for probes that speak neither TLS nor tokens.
	probes  *grpc.Server
	checker *healthChecker
}

// New builds the server and its interceptor chain.
func New(opts Options) (*Server, error) {
	if opts.Single == nil || opts.Pano == nil || opts.PreStitch == nil {
		return nil, errors.New("server: Options needs the Single, Pano and PreStitch repositories")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	serverOpts := interceptorChain(log, opts.Metrics)
	if opts.TracerProvider != nil {
		serverOpts = append(serverOpts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(opts.TracerProvider),
			otelgrpc.WithFilter(filters.Not(filters.HealthCheck())))))
	}
	s := &Server{grpc: grpc.NewServer(serverOpts...), health: health.NewServer()}
	services := map[string]func(){
		metadatav1.SingleImageMetadataService_ServiceDesc.ServiceName: func() {
			metadatav1.RegisterSingleImageMetadataServiceServer(s.grpc, &singleImageService{
				h: &imageHandler[*metadatav1.SingleImageMetadata]{repo: opts.Single, log: log, fromImage: singleImageFromImage}})
		},
		metadatav1.PanoImageMetadataService_ServiceDesc.ServiceName: func() {
			metadatav1.RegisterPanoImageMetadataServiceServer(s.grpc, &panoImageService{
				h: &imageHandler[*metadatav1.PanoImageMetadata]{repo: opts.Pano, log: log, fromImage: panoImageFromImage}})
		},
		metadatav1.PreStitchImageMetadataService_ServiceDesc.ServiceName: func() {
			metadatav1.RegisterPreStitchImageMetadataServiceServer(s.grpc, &preStitchImageService{
				h: &imageHandler[*metadatav1.PreStitchImageMetadata]{repo: opts.PreStitch, log: log, fromImage: preStitchImageFromImage}})
		},
	}
	if opts.Retention != nil {
		if opts.MinRetentionDays <= 0 {
			opts.MinRetentionDays = 1
		}
		services[metadatav1.RetentionService_ServiceDesc.ServiceName] = func() {
			metadatav1.RegisterRetentionServiceServer(s.grpc, &retentionService{
				engine: opts.Retention, minDays: opts.MinRetentionDays, log: log})
		}
	}
	if opts.Video != nil {
		services[metadatav1.VideoMetadataService_ServiceDesc.ServiceName] = func() {
			metadatav1.RegisterVideoMetadataServiceServer(s.grpc, &videoService{repo: opts.Video, log: log})
		}
	}
	if opts.Devices != nil {
		services[metadatav1.DeviceStateService_ServiceDesc.ServiceName] = func() {
			metadatav1.RegisterDeviceStateServiceServer(s.grpc, &deviceStateService{repo: opts.Devices, log: log})
		}
	}
	if opts.Acquisition != nil {
		services[metadatav1.AcquisitionInstanceService_ServiceDesc.ServiceName] = func() {
			metadatav1.RegisterAcquisitionInstanceServiceServer(s.grpc, &acquisitionInstanceService{repo: opts.Acquisition, log: log})
		}
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = defaultHealthInterval
	}
	s.checker = &healthChecker{health: s.health, store: opts.StoreCheck, writes: opts.WriteCheck,
		interval: opts.HealthInterval, log: log, reachable: true}
	for name, register := range services {
		register()
		s.checker.services = append(s.checker.services, name)
	}
	s.checker.check(context.Background())
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.probes = grpc.NewServer()
	healthpb.RegisterHealthServer(s.probes, s.health)
	reflection.Register(s.grpc)
	if opts.Metrics != nil {
		opts.Metrics.InitializeMetrics(s.grpc)
	}
	return s, nil
}

// Serve accepts connections on lis until Shutdown, keeping the health
// statuses in step with the store meanwhile.
func (s *Server) Serve(lis net.Listener) error {
	ctx, stopChecks := context.WithCancel(context.Background())
	checks := make(chan struct{})
	go func() {
		defer close(checks)
		s.checker.run(ctx)
	}()
	err := s.grpc.Serve(lis)
	stopChecks()
	<-checks
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown reports NOT_SERVING to health checks, stops accepting calls and
// waits for the calls in flight; when ctx ends first it cuts them off.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	// Probes saw NOT_SERVING throughout the drain.
	s.probes.Stop()
}
