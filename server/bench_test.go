package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// benchConn serves the image services on an on-disk Pebble store (every
// create pays a real fsync, shared by concurrent creates) behind the real
// interceptor chain, and dials it over bufconn. Log lines at logLevel and
// above are formatted, as the daemon's are, then discarded; the default
// (info) writes one line per call.
func benchConn(b *testing.B, logLevel ...slog.Level) *grpc.ClientConn {
	b.Helper()
	level := slog.LevelInfo
	if len(logLevel) > 0 {
		level = logLevel[0]
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: level}))
	db, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return benchServe(b, db, quiet)
}

// benchServe serves the image services on a backend behind the real
// interceptor chain, logging to logger, and dials it over bufconn.
func benchServe(b *testing.B, db store.Backend, logger *slog.Logger) *grpc.ClientConn {
	b.Helper()
	opts := server.Options{Logger: logger}
	for _, kind := range images.Kinds {
		repo, err := images.Open(b.Context(), db, images.Options{Kind: kind})
		if err != nil {
			b.Fatal(err)
		}
		switch kind {
		case images.Single:
			opts.Single = repo
		case images.Pano:
			opts.Pano = repo
		case images.PreStitch:
			opts.PreStitch = repo
		}
	}
	srv, err := server.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(func() { srv.Shutdown(context.Background()) })
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// nextImage hands out distinct (camera, instant) pairs across goroutines.
type nextImage struct{ n atomic.Int64 }

func (g *nextImage) request() *metadatav1.CreateSingleImageMetadataRequest {
	n := g.n.Add(1)
	return &metadatav1.CreateSingleImageMetadataRequest{Metadata: &metadatav1.SingleImageMetadata{
		CameraId:    fmt.Sprintf("cam-%04d", n%1000),
		CapturedAt:  timestamp(base.Add(time.Duration(n) * time.Minute)),
		BlobUri:     fmt.Sprintf("https://blobs.example/cam-%04d/%d.jpg", n%1000, n),
		ContentType: "image/jpeg", SizeBytes: 345678, Width: 1920, Height: 1080,
		Attributes: map[string]string{"site": "north"},
	}}
}

// BenchmarkCreate is one create at a time: each waits for its own fsync.
func BenchmarkCreate(b *testing.B) {
	client := metadatav1.NewSingleImageMetadataServiceClient(benchConn(b))
	var gen nextImage
	for b.Loop() {
		if _, err := client.CreateSingleImageMetadata(b.Context(), gen.request()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateParallel runs creates from many goroutines (-cpu and
// SetParallelism set how many), as a fleet's acquisition services do:
// concurrent creates share fsyncs through Pebble's group commit. It runs
// with a line per call logged (log=info, the daemon's default) and with
// successful calls not logged (log=warn).
func BenchmarkCreateParallel(b *testing.B) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn} {
		b.Run("log="+strings.ToLower(level.String()), func(b *testing.B) {
			client := metadatav1.NewSingleImageMetadataServiceClient(benchConn(b, level))
			var gen nextImage
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.CreateSingleImageMetadata(context.Background(), gen.request()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkGetLatest reads the newest image of one of 1,000 cameras.
func BenchmarkGetLatest(b *testing.B) {
	client := metadatav1.NewSingleImageMetadataServiceClient(benchConn(b))
	var gen nextImage
	for range 5000 {
		if _, err := client.CreateSingleImageMetadata(b.Context(), gen.request()); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			camera := fmt.Sprintf("cam-%04d", n.Add(1)%1000)
			if _, err := client.GetLatestSingleImageMetadata(context.Background(),
				&metadatav1.GetLatestSingleImageMetadataRequest{CameraId: camera}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHealthCheck is the cheapest call the server answers, through the
// same connection and interceptors: the framework's own ceiling, against
// which the other figures read as ratios.
func BenchmarkHealthCheck(b *testing.B) {
	client := healthpb.NewHealthClient(benchConn(b))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
