package fleet_test

import (
	"flag"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// benchView is the view of benchStore's store at now.
func benchView(b *testing.B, now time.Time, seed func(add func(images.Image))) *fleet.View {
	b.Helper()
	db, repo := benchStore(b, seed)
	view, err := fleet.Open(fleet.Options{Repo: repo, Embedded: db, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	return view
}

// benchStore opens an embedded store in memory, tallied, and seeds it with
// seed's images, a BatchCreate per 1,000.
func benchStore(b *testing.B, seed func(add func(images.Image))) (*pebble.DB, *images.Repository) {
	b.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	repo, err := images.Open(b.Context(), db, images.Options{Kind: images.Single})
	if err != nil {
		b.Fatal(err)
	}
	primary, _ := repo.Tables()
	if err := db.Tally(b.Context(), primary.Name()); err != nil {
		b.Fatal(err)
	}
	var batch []images.Image
	flush := func() {
		for _, r := range repo.BatchCreate(b.Context(), batch) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		batch = batch[:0]
	}
	seed(func(img images.Image) {
		if batch = append(batch, img); len(batch) == images.MaxBatchCreate {
			flush()
		}
	})
	flush()
	return db, repo
}

// benchImage is an image of the shape bench/fleet-postgres.sh loads.
func benchImage(camera int, at time.Time) images.Image {
	id := fmt.Sprintf("cam-%06d", camera)
	return images.Image{CameraID: id, CapturedAt: at, BlobURI: fmt.Sprintf("https://blobs.example/%s/%d.jpg", id, at.Unix()),
		ContentType: "image/jpeg", SizeBytes: 345678, Width: 1920, Height: 1080, Attributes: map[string]string{"site": "north"}}
}

// cpuTime is the CPU time the process has used: on a shared machine,
// what an operation costs whatever the load, which wall time is not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs op as the benchmark's loop and reports its CPU time per op.
func loop(b *testing.B, op func()) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

var benchStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkMoment reads one minute of 10,000 cameras, every image whole,
// in pages of 1,000: the fleet at a moment, against PostgreSQL's SELECT
// of the same minute (bench/fleet-postgres.sh loads the same 10 minutes).
func BenchmarkMoment(b *testing.B) {
	const cameras, minutes = 10000, 10
	view := benchView(b, benchStart, func(add func(images.Image)) {
		for m := range minutes {
			for c := range cameras {
				add(benchImage(c, benchStart.Add(time.Duration(m)*time.Minute+time.Duration(c)*time.Millisecond)))
			}
		}
	})
	start := benchStart.Add(5 * time.Minute)
	loop(b, func() {
		n := 0
		var resume *store.Cursor
		for {
			imgs, next, err := view.Moment(b.Context(), start, start.Add(time.Minute), 1000, resume)
			if err != nil {
				b.Fatal(err)
			}
			n += len(imgs)
			if resume = next; resume == nil {
				break
			}
		}
		if n != cameras {
			b.Fatalf("read %d images, want %d", n, cameras)
		}
	})
}

// seedFleet is a fleet of that many cameras, history images each, a day apart,
// the newest an hour before now for all but every tenth camera, silent
// for two hours.
func seedFleet(cameras, history int, now time.Time) func(add func(images.Image)) {
	return func(add func(images.Image)) {
		for c := range cameras {
			latest := now.Add(-time.Hour)
			if c%10 == 0 {
				latest = now.Add(-2 * time.Hour)
			}
			for h := range history {
				add(benchImage(c, latest.Add(-time.Duration(h)*24*time.Hour)))
			}
		}
	}
}

// BenchmarkInventory lists all 100,000 cameras in pages of 1,000, and
// counts the silent ones (what the gauge does each minute), with 2 and 5
// images per camera: the cost follows the cameras, not their history.
func BenchmarkInventory(b *testing.B) {
	now := benchStart.Add(30 * 24 * time.Hour)
	for _, history := range []int{2, 5} {
		view := benchView(b, now, seedFleet(100000, history, now))
		b.Run(fmt.Sprintf("cameras=100000/history=%d/list", history), func(b *testing.B) {
			loop(b, func() { listAll(b, view, 100000) })
		})
		b.Run(fmt.Sprintf("cameras=100000/history=%d/count-silent", history), func(b *testing.B) {
			loop(b, func() {
				n, err := view.CountSilent(b.Context(), 90*time.Minute, fleet.DefaultLookBack)
				if err != nil || n != 10000 {
					b.Fatalf("counted %d silent cameras, %v; want 10000", n, err)
				}
			})
		})
	}
}

// azureCameras is the fleet of BenchmarkInventoryAzure: Azurite, on a
// loaded machine, writes a camera row (a partition each, so one request
// each) at tens to hundreds a second.
var azureCameras = flag.Int("fleet.azure-cameras", 100000, "cameras of BenchmarkInventoryAzure")

// BenchmarkInventoryAzure is BenchmarkInventory on Azure Table Storage
// (Azurite, the emulator: its speed is not Azure's): -fleet.azure-cameras
// cameras' rows in the camera table, written by CopyCameras from an embedded store
// (what metadatad copy does; its time is reported as copy-s), listed in
// pages of 1,000 and counted silent, each a scan of the camera table a
// page at a time.
func BenchmarkInventoryAzure(b *testing.B) {
	now := benchStart.Add(30 * 24 * time.Hour)
	cams := *azureCameras
	db, repo := benchStore(b, seedFleet(cams, 1, now))
	backend, err := aztable.Open(b.Context(), aztable.Options{ConnectionString: azurite.Require(b), TablePrefix: "b" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)})
	if err != nil {
		b.Fatal(err)
	}
	cameras, err := fleet.OpenCameraTable(b.Context(), backend, images.Single.DefaultTable())
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	if n, err := fleet.CopyCameras(b.Context(), db, images.Single.DefaultTable(), cameras); err != nil || n != int64(cams) {
		b.Fatalf("copied %d camera rows, %v", n, err)
	}
	copied := time.Since(began)
	view, err := fleet.Open(fleet.Options{Repo: repo, Cameras: cameras, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("cameras=%d/list", cams), func(b *testing.B) {
		loop(b, func() { listAll(b, view, cams) })
		b.ReportMetric(copied.Seconds(), "copy-s")
	})
	b.Run(fmt.Sprintf("cameras=%d/count-silent", cams), func(b *testing.B) {
		loop(b, func() {
			n, err := view.CountSilent(b.Context(), 90*time.Minute, fleet.DefaultLookBack)
			if err != nil || n != cams/10 {
				b.Fatalf("counted %d silent cameras, %v; want %d", n, err, cams/10)
			}
		})
	})
}

// BenchmarkCoverageYear finds the gaps of one camera over a year of an
// image a minute (525,600 images, an hour missing each day).
func BenchmarkCoverageYear(b *testing.B) {
	view := benchView(b, benchStart, func(add func(images.Image)) {
		for m := range 365 * 24 * 60 {
			if m%(24*60) >= 60 {
				add(benchImage(1, benchStart.Add(time.Duration(m)*time.Minute)))
			}
		}
	})
	loop(b, func() {
		c, err := view.Coverage(b.Context(), "cam-000001", benchStart, benchStart.Add(365*24*time.Hour), time.Minute)
		if err != nil || len(c.Gaps) != 365 {
			b.Fatalf("%d gaps, %v; want 365", len(c.Gaps), err)
		}
	})
}

// listAll lists the whole inventory in pages of 1,000, and fails unless it
// holds want cameras.
func listAll(b *testing.B, view *fleet.View, want int) {
	n, after := 0, ""
	for {
		cams, next, err := view.Cameras(b.Context(), fleet.CameraQuery{After: after, Limit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		n += len(cams)
		if after = next; after == "" {
			break
		}
	}
	if n != want {
		b.Fatalf("listed %d cameras, want %d", n, want)
	}
}
