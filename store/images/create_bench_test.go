package images_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// BenchmarkCreate is one single-image create after the API's checks, on
// the embedded store's in-memory filesystem, so that the create's own CPU
// (building, encoding and checking its rows, the commit) shows rather
// than a sync: in one transaction (txn), and index row first without one
// (index-first), the order a create on Azure takes.
func BenchmarkCreate(b *testing.B) {
	for _, mode := range []string{"txn", "index-first"} {
		b.Run(mode, func(b *testing.B) {
			var backend store.Backend = openDB(b)
			if mode == "index-first" {
				backend = plainBackend{Backend: backend}
			}
			r, err := images.Open(b.Context(), backend, images.Options{Kind: images.Single})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Date(2026, 12, 4, 2, 30, 0, 0, time.UTC)
			n := 0
			for b.Loop() {
				n++
				cam := fmt.Sprintf("cam-%04d", n%1000)
				img := images.Image{
					CameraID: cam, CapturedAt: start.Add(time.Duration(n) * time.Second),
					BlobURI: fmt.Sprintf("https://blobs.example/%s/%d.jpg", cam, n), ContentType: "image/jpeg",
					SizeBytes: 345678, Width: 1920, Height: 1080,
					Attributes: map[string]string{
						"site": "north-gate", "lens": "wide", "exposure": "1/250", "firmware": "4.2.1",
						"source": "https://acq.example/cams/17?stream=main&profile=hd",
					},
				}
				if _, err := r.Create(b.Context(), img); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
