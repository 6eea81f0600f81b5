package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// BenchmarkBacklogUpload stores images one create at a time, 16 creates at
// once, and 1,000 per BatchCreate call, on one server each, on the on-disk
// embedded store and on Azurite; ns/image is the figure to compare within a
// backend. Most cases give each image its own camera and minute, as a batch
// of any cameras and times would, which leaves a batch nothing to group
// per partition; "batch-1000-backlog" is what a camera fleet back online
// sends: 10 cameras' 100 missed minutes, so that the index rows of a minute
// and the primary rows of a camera share their backend batches.
func BenchmarkBacklogUpload(b *testing.B) {
	for _, backend := range []struct {
		name string
		conn func(b *testing.B) *grpc.ClientConn
	}{
		{"embedded", func(b *testing.B) *grpc.ClientConn { return benchConn(b) }},
		{"azure", func(b *testing.B) *grpc.ClientConn {
			return benchServe(b, openAzure(b), slog.New(slog.DiscardHandler))
		}},
	} {
		b.Run(backend.name, func(b *testing.B) { benchmarkBacklogUpload(b, backend.conn) })
	}
}

func benchmarkBacklogUpload(b *testing.B, conn func(b *testing.B) *grpc.ClientConn) {
	perImage := func(b *testing.B, images int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(images), "ns/image")
	}
	b.Run("create", func(b *testing.B) {
		client := metadatav1.NewSingleImageMetadataServiceClient(conn(b))
		var gen nextImage
		for b.Loop() {
			if _, err := client.CreateSingleImageMetadata(b.Context(), gen.request()); err != nil {
				b.Fatal(err)
			}
		}
		perImage(b, b.N)
	})
	b.Run("create-16-at-once", func(b *testing.B) {
		client := metadatav1.NewSingleImageMetadataServiceClient(conn(b))
		var gen nextImage
		// RunParallel starts parallelism x GOMAXPROCS goroutines.
		b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := client.CreateSingleImageMetadata(context.Background(), gen.request()); err != nil {
					b.Error(err)
					return
				}
			}
		})
		perImage(b, b.N)
	})
	const size = 1000
	batch := func(b *testing.B, image func(call, i int) *metadatav1.SingleImageMetadata) {
		client := metadatav1.NewSingleImageMetadataServiceClient(conn(b))
		call := 0
		for b.Loop() {
			req := &metadatav1.BatchCreateSingleImageMetadataRequest{}
			for i := range size {
				req.Metadata = append(req.Metadata, image(call, i))
			}
			call++
			resp, err := client.BatchCreateSingleImageMetadata(b.Context(), req)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range resp.GetResults() {
				if r.GetStatus().GetCode() != 0 {
					b.Fatal(r.GetStatus())
				}
			}
		}
		perImage(b, b.N*size)
	}
	b.Run("batch-1000", func(b *testing.B) {
		var gen nextImage
		batch(b, func(int, int) *metadatav1.SingleImageMetadata { return gen.request().GetMetadata() })
	})
	b.Run("batch-1000-backlog", func(b *testing.B) {
		const cameras = 10
		batch(b, func(call, i int) *metadatav1.SingleImageMetadata {
			camera := fmt.Sprintf("cam-%04d", call*cameras+i%cameras)
			return &metadatav1.SingleImageMetadata{
				CameraId:    camera,
				CapturedAt:  timestamp(base.Add(time.Duration(i/cameras) * time.Minute)),
				BlobUri:     fmt.Sprintf("https://blobs.example/%s/%d.jpg", camera, i/cameras),
				ContentType: "image/jpeg", SizeBytes: 345678, Width: 1920, Height: 1080,
				Attributes: map[string]string{"site": "north"},
			}
		})
	})
}
