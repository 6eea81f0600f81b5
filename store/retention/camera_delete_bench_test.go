package retention_test

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// The layout of BenchmarkCameraDeleteAgainstPostgres (and of
// bench/camera-delete-compare.sh, which loads PostgreSQL the same): a year
// of one image a minute of the camera deleted, and a day of one a minute
// of each of benchKeptCameras others, kept.
const (
	benchYearImages  = 365 * 24 * 60
	benchKeptCameras = 10
	benchKeptImages  = 24 * 60
)

// BenchmarkCameraDeleteAgainstPostgres times a delete of every image of one
// camera (DeleteCameraImages) holding a year of one image a minute, on the
// embedded store, settled (flushed and compacted) first, from the job's
// start to its end; with the outbox of deleted images and without (the
// daemon's default). PostgreSQL's figure, DELETE ... WHERE camera_id = $1
// on the same rows, is bench/camera-delete-compare.sh's.
func BenchmarkCameraDeleteAgainstPostgres(b *testing.B) {
	for _, outbox := range []bool{false, true} {
		b.Run(fmt.Sprintf("outbox=%t", outbox), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := openBenchStore(b, nil, func(o *retention.Options, _ *queue.Options) { o.Outbox = outbox })
				seedCameraYear(b, s.repo)
				if err := s.db.Compact(b.Context()); err != nil {
					b.Fatal(err)
				}
				s.run(b)
				b.StartTimer()
				j, err := s.engine.Start(b.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Camera: "cam-gone"})
				if err != nil {
					b.Fatal(err)
				}
				j = s.await(b, j.ID)
				b.StopTimer()
				want := retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: benchYearImages, IndexRows: benchYearImages}
				if j.State != retention.Succeeded || j.Totals() != want {
					b.Fatalf("camera delete %s (%s): %+v, want %+v", j.State, j.Error, j.Totals(), want)
				}
				primary, index := s.repo.Tables()
				if n := countAll(b, primary); n != benchKeptCameras*benchKeptImages {
					b.Fatalf("%d primary rows left, want %d", n, benchKeptCameras*benchKeptImages)
				}
				if n := countAll(b, index); n != benchKeptCameras*benchKeptImages {
					b.Fatalf("%d index rows left, want %d", n, benchKeptCameras*benchKeptImages)
				}
				s.close()
			}
			b.ReportMetric(float64(b.N)*benchYearImages/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// seedCameraYear creates cam-gone's year, from 2025-01-01, and the kept
// cameras' day, 2025-06-01, in batches.
func seedCameraYear(b *testing.B, repo *images.Repository) {
	b.Helper()
	var imgs []images.Image
	year := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range benchYearImages {
		imgs = append(imgs, images.Image{CameraID: "cam-gone", CapturedAt: year.Add(time.Duration(i) * time.Minute),
			BlobURI: fmt.Sprintf("https://blobs.example/cam-gone/%d.jpg", i), ContentType: "image/jpeg", SizeBytes: 345678, Width: 1920, Height: 1080})
	}
	day := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for c := range benchKeptCameras {
		for i := range benchKeptImages {
			imgs = append(imgs, images.Image{CameraID: fmt.Sprintf("cam-kept-%02d", c), CapturedAt: day.Add(time.Duration(i) * time.Minute),
				BlobURI: "https://blobs.example/kept.jpg", ContentType: "image/jpeg", SizeBytes: 345678, Width: 1920, Height: 1080})
		}
	}
	g, ctx := errgroup.WithContext(b.Context())
	g.SetLimit(4)
	for i := 0; i < len(imgs); i += images.MaxBatchCreate {
		chunk := imgs[i:min(i+images.MaxBatchCreate, len(imgs))]
		g.Go(func() error {
			for _, res := range repo.BatchCreate(ctx, chunk) {
				if res.Err != nil {
					return res.Err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("seeding: %v", err)
	}
}
