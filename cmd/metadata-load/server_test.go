package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/drivers"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// testServer is a real metadatad (the server package on Pebble in memory,
// its purge engine running) listening on 127.0.0.1, for the tool to load.
type testServer struct {
	addr string
	srv  *server.Server
	conn *grpc.ClientConn
	lis  *countingListener
}

// countingListener counts the bytes the server reads from each connection
// it accepts.
type countingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := new(atomic.Int64)
	l.mu.Lock()
	l.conns = append(l.conns, n)
	l.mu.Unlock()
	return countingConn{Conn: c, read: n}, nil
}

// received is the bytes read from each connection accepted so far.
func (l *countingListener) received() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, n := range l.conns {
		out = append(out, n.Load())
	}
	return out
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	repos := map[images.Kind]*images.Repository{}
	for _, k := range images.Kinds {
		if repos[k], err = images.Open(t.Context(), db, images.Options{Kind: k}); err != nil {
			t.Fatal(err)
		}
	}
	engine, err := retention.Open(t.Context(), retention.Options{
		Backend: db, Repositories: []*images.Repository{repos[images.Single], repos[images.Pano], repos[images.PreStitch]},
		Logger: quiet, PollInterval: 5 * time.Millisecond, Driver: drivers.For(db, queue.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	purgeCtx, stopPurges := context.WithCancel(context.Background())
	purges := make(chan error, 1)
	go func() { purges <- engine.Run(purgeCtx) }()
	srv, err := server.New(server.Options{
		Single: repos[images.Single], Pano: repos[images.Pano], PreStitch: repos[images.PreStitch],
		Retention: engine, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: tcp}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		stopPurges()
		if err := <-purges; err != nil {
			t.Errorf("purge engine: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &testServer{addr: lis.Addr().String(), srv: srv, conn: conn, lis: lis}
}

// seeded reports whether the first cameras of the tool's fleet have an
// image of every type.
func (s *testServer) seeded(cameras int) bool {
	ctx := context.Background()
	ids := make([]string, cameras)
	for i := range ids {
		ids[i] = fmt.Sprintf("load-cam-%06d", i)
	}
	one, err1 := metadatav1.NewSingleImageMetadataServiceClient(s.conn).BatchGetLatestSingleImageMetadata(ctx, &metadatav1.BatchGetLatestSingleImageMetadataRequest{CameraIds: ids})
	p, err2 := metadatav1.NewPanoImageMetadataServiceClient(s.conn).BatchGetLatestPanoImageMetadata(ctx, &metadatav1.BatchGetLatestPanoImageMetadataRequest{CameraIds: ids})
	ps, err3 := metadatav1.NewPreStitchImageMetadataServiceClient(s.conn).BatchGetLatestPreStitchImageMetadata(ctx, &metadatav1.BatchGetLatestPreStitchImageMetadataRequest{CameraIds: ids})
	return err1 == nil && err2 == nil && err3 == nil &&
		len(one.GetMetadata()) == cameras && len(p.GetMetadata()) == cameras && len(ps.GetMetadata()) == cameras
}

// latest is the newest image of a camera of each type, as the server has it.
func (s *testServer) latest(t *testing.T, camera string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	one, err := metadatav1.NewSingleImageMetadataServiceClient(s.conn).GetLatestSingleImageMetadata(t.Context(),
		&metadatav1.GetLatestSingleImageMetadataRequest{CameraId: camera})
	if err != nil {
		t.Fatalf("GetLatest single of %s: %v", camera, err)
	}
	out["single"] = one.GetMetadata().GetCapturedAt().AsTime()
	p, err := metadatav1.NewPanoImageMetadataServiceClient(s.conn).GetLatestPanoImageMetadata(t.Context(),
		&metadatav1.GetLatestPanoImageMetadataRequest{CameraId: camera})
	if err != nil {
		t.Fatalf("GetLatest pano of %s: %v", camera, err)
	}
	out["pano"] = p.GetMetadata().GetCapturedAt().AsTime()
	ps, err := metadatav1.NewPreStitchImageMetadataServiceClient(s.conn).GetLatestPreStitchImageMetadata(t.Context(),
		&metadatav1.GetLatestPreStitchImageMetadataRequest{CameraId: camera})
	if err != nil {
		t.Fatalf("GetLatest pre-stitch of %s: %v", camera, err)
	}
	out["pre-stitch"] = ps.GetMetadata().GetCapturedAt().AsTime()
	return out
}

// singles lists every single image of a camera, oldest last.
func (s *testServer) singles(t *testing.T, camera string) []*metadatav1.SingleImageMetadata {
	t.Helper()
	var all []*metadatav1.SingleImageMetadata
	client := metadatav1.NewSingleImageMetadataServiceClient(s.conn)
	req := &metadatav1.ListSingleImageMetadataRequest{CameraId: camera, PageSize: 1000}
	for {
		resp, err := client.ListSingleImageMetadata(t.Context(), req)
		if err != nil {
			t.Fatalf("List of %s: %v", camera, err)
		}
		all = append(all, resp.GetMetadata()...)
		if resp.GetNextPageToken() == "" {
			return all
		}
		req.PageToken = resp.GetNextPageToken()
	}
}
