package embedded_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// TestTheLastSectionRereadsOnlyLateCameras: the last section of a purge in
// many sections reads again only the cameras written since their section
// in the days it purges (an old image uploaded late, a new camera's
// backlog), not every camera, and purges what they got, counted exactly: a
// new image of a purged camera is no reason to read it again.
func TestTheLastSectionRereadsOnlyLateCameras(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var live atomic.Bool
		live.Store(true) // many sections
		f := openPacedFixture(t, pacedStore{opts: embedded.Options{SectionTime: 4 * time.Millisecond, LiveShare: 0.5}, live: &live,
			cost: func(string) time.Duration { return time.Millisecond }, fs: vfs.NewMem()})
		seedPaced(t, f)
		old := time.Now().UTC().AddDate(0, -1, 0).Add(time.Hour)
		late := []images.Image{
			{CameraID: "cam-000", CapturedAt: old},              // purged in the first section
			{CameraID: "cam-000b", CapturedAt: old},             // a new camera among those purged
			{CameraID: "cam-001", CapturedAt: time.Now().UTC()}, // a new image: not late
		}
		f.purger.committed = func(n int) {
			if n != 2 {
				return
			}
			for _, img := range late {
				img.BlobURI = "https://images.example/late/" + img.CameraID + ".jpg"
				if _, err := f.repo.Create(t.Context(), img); err != nil {
					t.Error(err)
				}
			}
		}
		f.run(t)
		j, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: f.cutoff})
		if err != nil {
			t.Fatal(err)
		}
		for !j.State.Terminal() {
			time.Sleep(10 * time.Millisecond)
			if j, err = f.engine.Get(t.Context(), j.ID); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		want := int64(pacedCameras*pacedImages + 2)
		if c := j.Totals(); j.State != retention.Succeeded || c.MetadataRows != want || c.IndexRows != want || c.DevicesDone != pacedCameras+1 {
			t.Fatalf("purge ended %s (%s) with %+v, want %d primary and index rows of %d cameras", j.State, j.Error, c, want, pacedCameras+1)
		}
		if primary, index := countRows(t, f.repo); primary != 1 || index != 1 {
			t.Errorf("%d primary and %d index rows left, want the new image's", primary, index)
		}
		sections := f.purger.spent()
		if len(sections) < 4 {
			t.Fatalf("%d sections, want many", len(sections))
		}
		last := sections[len(sections)-1]
		if !slices.Equal(last.named, []string{"cam-000", "cam-000b"}) {
			t.Errorf("the last section read again %q, want the cameras written late, cam-000 and cam-000b", last.named)
		}
		// Its own cameras' range is from where the sections before it
		// stopped.
		if len(last.spans) != 1 || last.spans[0].From <= "cam-000b" || last.spans[0].To != "" {
			t.Errorf("the last section read the tallies of %q, want those from where the sections before it stopped", last.spans)
		}
		t.Logf("%d sections; the last read %q again and %q", len(sections), last.named, last.spans)
	})
}
