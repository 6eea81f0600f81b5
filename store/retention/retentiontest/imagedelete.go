package retentiontest

import (
	"errors"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// newest is the capture of each seeded camera's newest image.
var newest = base.Add(220 * time.Second)

// deleteImage deletes gone's image of kind captured at at.
func deleteImage(t *testing.T, f *Fixture, kind images.Kind, at time.Time) error {
	t.Helper()
	return f.Engine.DeleteImage(t.Context(), retention.DeleteImageRequest{Kind: kind, CameraID: gone, CapturedAt: at})
}

// indexedOf counts the index rows of camera in r.
func indexedOf(t *testing.T, r *images.Repository, camera string) int {
	t.Helper()
	n := 0
	for _, c := range indexedCameras(t, r) {
		if c == camera {
			n++
		}
	}
	return n
}

// TestDeleteOneImage: deleting one image of each kind takes its primary
// and index rows, names it once in the outbox, leaves the camera's latest
// at the previous image, answers not found the second time, and frees
// the instant for the right image; the tallies stay exact, so a camera
// delete after it counts what is left.
func testDeleteOneImage(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.Outbox = true
		f := open(t, opts)
		f.Seed(t, 3)
		for _, kind := range images.Kinds {
			r := f.Repo(kind)
			if err := deleteImage(t, f, kind, newest); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			latest, err := r.Latest(t.Context(), gone, images.Span{}, images.Filter{})
			if err != nil || !latest.CapturedAt.Equal(newest.Add(-20*time.Second)) {
				t.Errorf("%s latest after the delete: %v, %v; want the image before", kind, latest.CapturedAt, err)
			}
			if n := indexedOf(t, r, gone); n != perCamera-1 {
				t.Errorf("%s: %d index rows of the camera, want %d", kind, n, perCamera-1)
			}
			if err := deleteImage(t, f, kind, newest); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: second delete: %v, want ErrNotFound", kind, err)
			}
			right := images.Image{CameraID: gone, CapturedAt: newest, BlobURI: "blob://right"}
			if _, err := r.Create(t.Context(), right); err != nil {
				t.Errorf("%s: create of the right image at the freed instant: %v", kind, err)
			}
		}
		deleted := deletedAfter(t, f, "")
		if len(deleted) != len(images.Kinds) {
			t.Fatalf("the outbox names %d images, want %d: %+v", len(deleted), len(images.Kinds), deleted)
		}
		for i, d := range deleted {
			if d.CameraID != gone || !d.CapturedAt.Equal(newest) || d.Kind != images.Kinds[i] || d.JobID != "" {
				t.Errorf("outbox record %d: %+v", i, d)
			}
		}
		f.Settle()
		f.Run(t)
		j := f.Purge(t, retention.StartRequest{Kinds: images.Kinds, Camera: gone})
		for _, kind := range images.Kinds {
			want := retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: perCamera, IndexRows: perCamera}
			if got := j.Progress(kind).Counts; got != want {
				t.Errorf("%s camera delete after image deletes counts %+v, want %+v", kind, got, want)
			}
		}
	})
}

// TestDeleteTheLatestClearDayImage: the pointer a pano camera's latest
// clear-day read uses still finds the previous clear-day image once the
// newest is deleted.
func testDeleteTheLatestClearDayImage(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, open func(*testing.T, Options) *Fixture) {
		f := open(t, quickOptions())
		r := f.Repo(images.Pano)
		for _, at := range []time.Time{base, base.Add(time.Minute), base.Add(2 * time.Minute)} {
			if _, err := r.Create(t.Context(), images.Image{CameraID: gone, CapturedAt: at, IsClearDay: !at.Equal(base.Add(2 * time.Minute))}); err != nil {
				t.Fatal(err)
			}
		}
		clear := images.Filter{ClearDayOnly: true}
		if got, err := r.Latest(t.Context(), gone, images.Span{}, clear); err != nil || !got.CapturedAt.Equal(base.Add(time.Minute)) {
			t.Fatalf("latest clear day before: %v, %v", got.CapturedAt, err)
		}
		if err := deleteImage(t, f, images.Pano, base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Latest(t.Context(), gone, images.Span{}, clear); err != nil || !got.CapturedAt.Equal(base) {
			t.Errorf("latest clear day after the delete: %v, %v; want %v", got.CapturedAt, err, base)
		}
		if got, err := r.Latest(t.Context(), gone, images.Span{}, images.Filter{}); err != nil || !got.CapturedAt.Equal(base.Add(2*time.Minute)) {
			t.Errorf("latest after the delete: %v, %v", got.CapturedAt, err)
		}
	})
}

// TestAnImageDeleteCutShortIsFinished: on the queue design, a delete that
// stopped after its primary row went (its index delete failed) leaves no
// primary row without its index row; its retry finishes it, and one never
// retried is finished when the engine retires old records, each named in
// the outbox once.
func testAnImageDeleteCutShortIsFinished(t *testing.T, ts *suite) {
	f := ts.open(t, func() Options { o := quickOptions(); o.Outbox = true; return o }())
	f.Seed(t, 3)
	_, index := f.Repo(images.Single).Tables()
	errIndex := errors.New("test: index delete fails")
	f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(table, op string, _ []store.Key) error {
		if table == index.Name() && op == "delete" {
			return errIndex
		}
		return nil
	}})
	retried, abandoned := newest, newest.Add(-20*time.Second)
	for _, at := range []time.Time{retried, abandoned} {
		if err := deleteImage(t, f, images.Single, at); !errors.Is(err, errIndex) {
			t.Fatalf("delete with failing index deletes: %v", err)
		}
	}
	requireIndexed(t, f, images.Single)
	if n := len(deletedAfter(t, f, "")); n != 0 {
		t.Fatalf("the outbox names %d images of deletes not finished", n)
	}
	f.OpenEngine(t, f.Base)
	if err := deleteImage(t, f, images.Single, retried); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := indexedOf(t, f.Repo(images.Single), gone); n != perCamera-1 {
		t.Errorf("after the retry: %d index rows of the camera, want %d", n, perCamera-1)
	}
	f.Clock.advance(time.Hour)
	if _, err := f.Engine.RetireJobs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := indexedOf(t, f.Repo(images.Single), gone); n != perCamera-2 {
		t.Errorf("after the retirement: %d index rows of the camera, want %d", n, perCamera-2)
	}
	named := map[time.Time]int{}
	for _, d := range deletedAfter(t, f, "") {
		named[d.CapturedAt]++
	}
	if named[retried] != 1 || named[abandoned] != 1 || len(named) != 2 {
		t.Errorf("the outbox names %v; want each delete once", named)
	}
}
