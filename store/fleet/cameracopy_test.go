package fleet_test

import (
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
)

// TestCopyCamerasFillsTheCameraTable copies the inventory of an embedded
// store into an Azure camera table, as `metadatad copy` does: the Azure
// view then lists the same cameras with the same exact captures, and a
// second copy writes the same rows.
func TestCopyCamerasFillsTheCameraTable(t *testing.T) {
	from, to := openEmbedded(t, t0), openAzure(t, t0)
	from.create(t, "cam-b", t0.Add(-90*time.Second), t0.Add(-49*time.Hour+7*time.Second), t0.Add(-3*time.Second))
	from.create(t, "cam-a", t0.Add(-time.Hour+1500*time.Millisecond))
	want, _, err := from.view.Cameras(t.Context(), fleet.CameraQuery{Limit: 10})
	if err != nil || len(want) != 2 {
		t.Fatalf("source inventory %v, %v", want, err)
	}
	for range 2 {
		n, err := fleet.CopyCameras(t.Context(), from.embedded, images.Single.DefaultTable(), to.cameras)
		if err != nil || n != 2 {
			t.Fatalf("CopyCameras wrote %d rows, %v; want 2", n, err)
		}
		got, _, err := to.view.Cameras(t.Context(), fleet.CameraQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, want, func(a, b fleet.Camera) bool {
			return a.ID == b.ID && a.First.Equal(b.First) && a.Latest.Equal(b.Latest)
		}) {
			t.Fatalf("Azure inventory after the copy %v, want %v", got, want)
		}
	}
}
