package fleet_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// countingTable counts the writes of a table.
type countingTable struct {
	store.Table
	writes atomic.Int64
}

func (c *countingTable) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	c.writes.Add(1)
	return c.Table.Insert(ctx, e)
}

func (c *countingTable) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	c.writes.Add(1)
	return c.Table.Update(ctx, e, mode, ifMatch)
}

// TestRecorderWritesAtMostOncePerInterval writes a camera's row on its
// first image, then not again within the interval however many images
// come, then once with what came meanwhile.
func TestRecorderWritesAtMostOncePerInterval(t *testing.T) {
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	inner, err := fleet.OpenCameraTable(t.Context(), db, "SingleImageMetadata")
	if err != nil {
		t.Fatal(err)
	}
	table := &countingTable{Table: inner}
	c := &clock{t: t0}
	rec, err := fleet.NewRecorder(fleet.RecorderOptions{Table: table, Interval: time.Minute, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	tell := func(at time.Time) { rec.Created(t.Context(), images.Image{CameraID: "cam", CapturedAt: at}) }
	tell(t0)
	if n := table.writes.Load(); n != 1 {
		t.Fatalf("%d writes after the first image, want 1", n)
	}
	for i := 1; i <= 50; i++ {
		c.add(time.Second)
		tell(t0.Add(time.Duration(i) * time.Second))
	}
	tell(t0.Add(-time.Hour)) // a backlog image
	if n := table.writes.Load(); n != 1 {
		t.Fatalf("%d writes within the interval, want 1", n)
	}
	if n, err := rec.RunOnce(t.Context()); err != nil || n != 0 {
		t.Fatalf("RunOnce within the interval wrote %d, %v", n, err)
	}
	c.add(10 * time.Second)
	if n, err := rec.RunOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("RunOnce after the interval wrote %d, %v; want 1", n, err)
	}
	view, err := fleet.Open(fleet.Options{Repo: openRepo(t, db), Cameras: table, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	cams, _, err := view.Cameras(t.Context(), fleet.CameraQuery{Limit: 10})
	want := fleet.Camera{ID: "cam", First: t0.Add(-time.Hour), Latest: t0.Add(50 * time.Second)}
	if err != nil || len(cams) != 1 || !sameCamera(cams[0], want) {
		t.Fatalf("cameras = %v, %v; want %v", cams, err, want)
	}
}

func openRepo(t *testing.T, db *pebble.DB) *images.Repository {
	t.Helper()
	repo, err := images.Open(t.Context(), db, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestRecorderConcurrentCreates: creates of many cameras at once, as a
// replica's calls come, leave each row spanning exactly its images once
// the interval has passed.
func TestRecorderConcurrentCreates(t *testing.T) {
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table, err := fleet.OpenCameraTable(t.Context(), db, "SingleImageMetadata")
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	rec, err := fleet.NewRecorder(fleet.RecorderOptions{Table: table, Interval: time.Minute, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				camera := fmt.Sprintf("cam-%d", i%10)
				rec.Created(t.Context(), images.Image{CameraID: camera, CapturedAt: t0.Add(time.Duration(w*100+i) * time.Second)})
			}
		})
	}
	wg.Wait()
	c.add(time.Minute)
	if _, err := rec.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	view, err := fleet.Open(fleet.Options{Repo: openRepo(t, db), Cameras: table, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	cams, _, err := view.Cameras(t.Context(), fleet.CameraQuery{Limit: 100})
	if err != nil || len(cams) != 10 {
		t.Fatalf("cameras = %v, %v", cams, err)
	}
	for i, cam := range cams {
		want := fleet.Camera{ID: fmt.Sprintf("cam-%d", i), First: t0.Add(time.Duration(i) * time.Second), Latest: t0.Add(time.Duration(790+i) * time.Second)}
		if !sameCamera(cam, want) {
			t.Errorf("camera %v, want %v", cam, want)
		}
	}
}
