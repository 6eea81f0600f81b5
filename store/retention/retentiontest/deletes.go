package retentiontest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// The camera the delete tests delete, of the three seed makes.
const gone = "cam-001"

// perCamera is how many images of each kind seed gives a camera.
const perCamera = 12

// cameraDelete is the request that deletes every image of gone.
func cameraDelete(dryRun bool) retention.StartRequest {
	return retention.StartRequest{Kinds: images.Kinds, Camera: gone, DryRun: dryRun}
}

// seedCameraDelete seeds three cameras and gives gone one more single
// image, captured after now: a delete of the camera takes everything.
func seedCameraDelete(t *testing.T, f *Fixture) {
	t.Helper()
	f.Seed(t, 3)
	future := images.Image{CameraID: gone, CapturedAt: f.Now().Add(time.Hour).Truncate(time.Second), BlobURI: "blob://future"}
	if _, err := f.Seeders(t)[0].Create(t.Context(), future); err != nil {
		t.Fatal(err)
	}
	f.LastCreate = f.Now()
	f.Settle()
}

// wantCameraDelete are the counts of a delete of gone after
// seedCameraDelete, per kind.
func wantCameraDelete(kind images.Kind) retention.Counts {
	n := int64(perCamera)
	if kind == images.Single {
		n++
	}
	return retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: n, IndexRows: n}
}

// checkCameraDeleted fails unless gone has no row left and every other
// camera all of its rows, in every kind.
func checkCameraDeleted(t *testing.T, f *Fixture) {
	t.Helper()
	for _, kind := range images.Kinds {
		primary, _ := f.Repo(kind).Tables()
		byCamera := map[string]int{}
		for _, e := range rows(t, primary) {
			byCamera[e.PartitionKey]++
		}
		for _, camera := range indexedCameras(t, f.Repo(kind)) {
			byCamera[camera+" (index)"]++
		}
		want := map[string]int{"cam-000": perCamera, "cam-002": perCamera, "cam-000 (index)": perCamera, "cam-002 (index)": perCamera}
		if fmt.Sprint(byCamera) != fmt.Sprint(want) {
			t.Errorf("%s rows by camera after the delete: %v, want %v", kind, byCamera, want)
		}
	}
}

// indexedCameras are the cameras of the index rows of r, one per row.
func indexedCameras(t *testing.T, r *images.Repository) []string {
	t.Helper()
	var out []string
	if err := r.EachIndexRow(t.Context(), store.Range{}, func(row images.IndexRow) error {
		out = append(out, row.CameraID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNamedOnce fails unless the outbox names each image of gone once and
// nothing else.
func checkNamedOnce(t *testing.T, f *Fixture) {
	t.Helper()
	seen := map[string]int{}
	for _, d := range deletedAfter(t, f, "") {
		if d.CameraID != gone {
			t.Errorf("the outbox names %s's image of %s", d.CameraID, d.CapturedAt)
		}
		seen[fmt.Sprintf("%s %s", d.Kind, d.CapturedAt.Format(time.RFC3339Nano))]++
	}
	want := 0
	for _, kind := range images.Kinds {
		want += int(wantCameraDelete(kind).MetadataRows)
	}
	if len(seen) != want {
		t.Errorf("the outbox names %d images, want %d", len(seen), want)
	}
	for img, n := range seen {
		if n != 1 {
			t.Errorf("the outbox names %s %d times", img, n)
		}
	}
}

// TestCameraDeleteTakesEveryImageOfOneCamera: a delete of a camera is a
// purge job that deletes all of that camera's images, future captures
// included, and nothing of any other, counts them exactly per kind and
// names each in the outbox once.
func testCameraDeleteTakesEveryImageOfOneCamera(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.Outbox = true
		f := open(t, opts)
		seedCameraDelete(t, f)
		f.Run(t)
		j := f.Purge(t, cameraDelete(false))
		if j.State != retention.Succeeded || j.Camera != gone {
			t.Fatalf("camera delete: %s (%s), camera %q", j.State, j.Error, j.Camera)
		}
		for _, kind := range images.Kinds {
			if got, want := j.Progress(kind).Counts, wantCameraDelete(kind); got != want {
				t.Errorf("%s counts %+v, want %+v", kind, got, want)
			}
		}
		checkCameraDeleted(t, f)
		checkNamedOnce(t, f)
	})
}

// TestCameraDeleteDryRunDeletesNothing: a dry run counts what the delete
// would take and deletes nothing.
func testCameraDeleteDryRunDeletesNothing(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		f := open(t, quickOptions())
		seedCameraDelete(t, f)
		f.Run(t)
		j := f.Purge(t, cameraDelete(true))
		if j.State != retention.Succeeded {
			t.Fatalf("dry run: %s (%s)", j.State, j.Error)
		}
		for _, kind := range images.Kinds {
			if got, want := j.Progress(kind).Counts, wantCameraDelete(kind); got != want {
				t.Errorf("%s dry run counts %+v, want %+v", kind, got, want)
			}
			primary, index := f.Repo(kind).Tables()
			if p, i, want := len(rows(t, primary)), len(rows(t, index)), 3*perCamera+int(wantCameraDelete(kind).MetadataRows)-perCamera; p != want || i != want {
				t.Errorf("%s after a dry run: %d primary and %d index rows, want %d each", kind, p, i, want)
			}
		}
	})
}

// TestDeletesOfAHeldCameraAreRefused: a camera on legal hold can be deleted
// neither whole nor one image at a time, and nothing of it goes.
func testDeletesOfAHeldCameraAreRefused(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		f := open(t, quickOptions())
		f.Seed(t, 3)
		if _, err := f.Engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: gone, Reason: "case 9"}); err != nil {
			t.Fatal(err)
		}
		if j, err := f.Engine.Start(t.Context(), cameraDelete(false)); !errors.Is(err, retention.ErrCameraHeld) {
			t.Errorf("camera delete of a held camera: %+v, %v; want ErrCameraHeld", j, err)
		}
		err := f.Engine.DeleteImage(t.Context(), retention.DeleteImageRequest{Kind: images.Single, CameraID: gone, CapturedAt: base})
		if !errors.Is(err, retention.ErrCameraHeld) {
			t.Errorf("image delete of a held camera: %v; want ErrCameraHeld", err)
		}
		if jobs, _, err := f.Engine.List(t.Context(), 10, nil); err != nil || len(jobs) != 0 {
			t.Errorf("jobs after the refusals: %d, %v; want none", len(jobs), err)
		}
		for _, kind := range images.Kinds {
			primary, _ := f.Repo(kind).Tables()
			if n := len(rows(t, primary)); n != 3*perCamera {
				t.Errorf("%s: %d rows left, want %d", kind, n, 3*perCamera)
			}
		}
	})
}

// TestCameraDeleteTakesNoCutoff: a cutoff or policies with a camera are
// refused, not half applied.
func testCameraDeleteTakesNoCutoff(t *testing.T, ts *suite) {
	f := ts.open(t, quickOptions())
	for _, req := range []retention.StartRequest{
		{Kinds: images.Kinds, Camera: gone, Cutoff: cutoff},
		{Kinds: images.Kinds, Camera: gone, UsePolicies: true},
	} {
		if _, err := f.Engine.Start(t.Context(), req); !errors.Is(err, retention.ErrCameraCutoff) {
			t.Errorf("Start(%+v): %v, want ErrCameraCutoff", req, err)
		}
	}
}

// TestCameraDeleteCancelled: a camera delete cancelled as it begins to
// delete ends cancelled, its counts what is gone, and the next delete of
// the camera takes the rest.
func testCameraDeleteCancelled(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.Outbox = true
		f := open(t, opts)
		seedCameraDelete(t, f)
		primary, _ := f.Repo(images.Single).Tables()
		block := newBlockOnce(func(table, op string) bool {
			return op == "exclusive" || table == primary.Name() && deletesRows(op)
		})
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: block.Before})
		f.Run(t)
		started, err := f.Engine.Start(t.Context(), cameraDelete(false))
		if err != nil {
			t.Fatal(err)
		}
		<-block.reached
		if _, err := f.OtherReplica(t).Cancel(t.Context(), started.ID); err != nil {
			t.Fatal(err)
		}
		close(block.release)
		j := f.Await(t, started.ID)
		if j.State != retention.Cancelled {
			t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
		}
		left := 0
		for _, kind := range images.Kinds {
			primary, _ := f.Repo(kind).Tables()
			own := int64(0)
			for _, e := range rows(t, primary) {
				if e.PartitionKey == gone {
					own++
				}
			}
			indexed := int64(0)
			for _, camera := range indexedCameras(t, f.Repo(kind)) {
				if camera == gone {
					indexed++
				}
			}
			c, all := j.Progress(kind).Counts, wantCameraDelete(kind).MetadataRows
			if c.MetadataRows != all-own || c.IndexRows != all-indexed {
				t.Errorf("%s: cancelled job counts %+v; %d of %d primary, %d index rows left", kind, c, own, all, indexed)
			}
			left += int(own)
		}
		if left == 0 {
			t.Error("the cancelled delete took everything: the cancel stopped nothing")
		}
		next := f.Purge(t, cameraDelete(false))
		if next.State != retention.Succeeded {
			t.Fatalf("next delete: %s (%s)", next.State, next.Error)
		}
		checkCameraDeleted(t, f)
		checkNamedOnce(t, f)
	})
}

// TestCrashAtAnyWriteOfACameraDeleteResumesExactly: a camera delete whose
// store dies at any write resumes after the restart and ends with exact
// counts, every image of the camera gone and named once, nothing else
// touched.
func testCrashAtAnyWriteOfACameraDeleteResumesExactly(t *testing.T, ts *suite) {
	crashAtEveryWrite(t, ts, func(t *testing.T, open func(*testing.T, Options) *Fixture, n int) bool {
		return crashCameraDelete(t, open, n, func(b *HookedBackend) store.Backend { return b })
	})
}

func crashCameraDelete(t *testing.T, open func(*testing.T, Options) *Fixture, n int, wrap func(*HookedBackend) store.Backend) bool {
	opts := quickOptions()
	opts.Outbox = true
	f := open(t, opts)
	seedCameraDelete(t, f)
	c := f.StartCrashing(t, n, wrap, cameraDelete(false))
	if len(c.jobs) == 0 {
		return c.dead
	}
	if c.startErr != nil && c.jobs[0].Unconfirmed {
		return c.dead // never runs: TestCrashAtAnyWriteResumesExactly checks that
	}
	if c.dead {
		c.restarted.Run(t)
	}
	j := c.restarted.Await(t, c.jobs[0].ID)
	if j.State != retention.Succeeded {
		t.Fatalf("resumed camera delete: %s (%s)", j.State, j.Error)
	}
	for _, kind := range images.Kinds {
		// The queue design may flag a count as a bound it still meets (see
		// retention.Counts.MetadataRowsLowerBound).
		wantCountsAfterFaults(t, kind.String(), j.Progress(kind).Counts, wantCameraDelete(kind))
	}
	checkCameraDeleted(t, c.restarted)
	checkNamedOnce(t, c.restarted)
	return c.dead
}

// TestAHoldPlacedDuringACameraDeleteKeepsTheRest: a hold placed after a
// camera's delete started, before its deletes begin, keeps the camera
// whole, counted held, as it would in any purge.
func testAHoldPlacedDuringACameraDeleteKeepsTheRest(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		f := open(t, quickOptions())
		f.Seed(t, 3)
		block := newBlockOnce(func(table, op string) bool {
			return op == "exclusive" || table == queue.DefaultTasksTable && op == "batch-insert"
		})
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: block.Before})
		f.Run(t)
		single := []images.Kind{images.Single}
		started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: single, Camera: gone})
		if err != nil {
			t.Fatal(err)
		}
		<-block.reached
		if _, err := f.Engine.Policies().CreateHold(t.Context(), policy.Hold{CameraID: gone}); err != nil {
			t.Fatal(err)
		}
		close(block.release)
		j := f.Await(t, started.ID)
		if c := j.Totals(); j.State != retention.Succeeded || c.MetadataRows != 0 || c.DevicesHeld != 1 {
			t.Errorf("camera delete held midway: %s (%s), %+v; want it to end deleting nothing, the camera held", j.State, j.Error, c)
		}
		primary, _ := f.Repo(images.Single).Tables()
		if n := len(rows(t, primary)); n != 3*perCamera {
			t.Errorf("%d single rows left, want %d", n, 3*perCamera)
		}
	})
}
