package server_test

import (
	"context"
	"testing"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// BenchmarkBacklogUpload stores images one create at a time, 16 creates at
// once, and 1,000 per BatchCreate call, on one server each; ns/image is the
// figure to compare. Each image has its own camera and minute, as a batch
// of any cameras and times would.
func BenchmarkBacklogUpload(b *testing.B) {
	perImage := func(b *testing.B, images int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(images), "ns/image")
	}
	b.Run("create", func(b *testing.B) {
		client := metadatav1.NewSingleImageMetadataServiceClient(benchConn(b))
		var gen nextImage
		for b.Loop() {
			if _, err := client.CreateSingleImageMetadata(b.Context(), gen.request()); err != nil {
				b.Fatal(err)
			}
		}
		perImage(b, b.N)
	})
	b.Run("create-16-at-once", func(b *testing.B) {
		client := metadatav1.NewSingleImageMetadataServiceClient(benchConn(b))
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
		perImage(b, b.N)
	})
	b.Run("batch-1000", func(b *testing.B) {
		client := metadatav1.NewSingleImageMetadataServiceClient(benchConn(b))
		var gen nextImage
		const size = 1000
		for b.Loop() {
			req := &metadatav1.BatchCreateSingleImageMetadataRequest{}
			for range size {
				req.Metadata = append(req.Metadata, gen.request().GetMetadata())
			}
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
	})
}
