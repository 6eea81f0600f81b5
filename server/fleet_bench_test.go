package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// BenchmarkListFleetImages reads one minute of 10,000 cameras whole, in
// pages of 1,000, through ListFleetImages over TCP on 127.0.0.1: the fleet
// at a moment as a client meets it, marshalling and the wire included, as
// PostgreSQL's SELECT through pgbench includes its protocol. The layout of
// store/fleet's BenchmarkMoment and bench/fleet-postgres.sh (10 minutes of
// 10,000 cameras, an image each a minute), on an on-disk store, compacted.
func BenchmarkListFleetImages(b *testing.B) {
	const cameras, minutes = 10000, 10
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	opts := server.Options{Logger: quiet, Fleet: map[images.Kind]*fleet.View{}}
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
		if opts.Fleet[kind], err = fleet.Open(fleet.Options{Repo: repo, Embedded: db}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []images.Image
	for m := range minutes {
		for c := range cameras {
			id := fmt.Sprintf("cam-%06d", c)
			at := start.Add(time.Duration(m)*time.Minute + time.Duration(c)*time.Millisecond)
			batch = append(batch, images.Image{CameraID: id, CapturedAt: at, BlobURI: fmt.Sprintf("https://blobs.example/%s/%d.jpg", id, at.Unix()),
				ContentType: "image/jpeg", SizeBytes: 345678, Width: 1920, Height: 1080, Attributes: map[string]string{"site": "north"}})
			if len(batch) == images.MaxBatchCreate {
				for _, r := range opts.Single.BatchCreate(b.Context(), batch) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				batch = batch[:0]
			}
		}
	}
	if err := db.Compact(b.Context()); err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(func() { srv.Shutdown(b.Context()) })
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	client := metadatav1.NewFleetServiceClient(conn)
	minute := start.Add(5 * time.Minute)
	req := &metadatav1.ListFleetImagesRequest{ImageType: metadatav1.ImageType_IMAGE_TYPE_SINGLE,
		StartTime: timestamppb.New(minute), EndTime: timestamppb.New(minute.Add(time.Minute)), PageSize: 1000}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		req.PageToken = ""
		for {
			resp, err := client.ListFleetImages(b.Context(), req)
			if err != nil {
				b.Fatal(err)
			}
			n += len(resp.GetImages())
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
		if n != cameras {
			b.Fatalf("read %d images, want %d", n, cameras)
		}
	}
}
