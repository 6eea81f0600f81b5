package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// plainBackend hides the Transactor of the backend it wraps: a repository
// over it writes index rows without their images, as one did before index
// rows carried them.
type plainBackend struct{ store.Backend }

// TestMomentReadsIndexRowsWithoutImages reads a window of the embedded
// store whose index rows are of three kinds: carrying their images, only
// pointing at their primary rows (written before index rows carried
// images, or copied from Azure), which Moment reads, and pointing at no
// primary row, which it leaves out.
func TestMomentReadsIndexRowsWithoutImages(t *testing.T) {
	ctx := context.Background()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	repo, err := images.Open(ctx, db, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	older, err := images.Open(ctx, plainBackend{db}, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, r := range []*images.Repository{repo, older, repo, older} {
		img, err := r.Create(ctx, images.Image{CameraID: "cam-" + string(rune('a'+i)), CapturedAt: t0.Add(time.Duration(i) * time.Second), BlobURI: "blob://" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		want[img.CameraID] = img.BlobURI
	}
	_, index := repo.Tables()
	orphan := store.InvertedTicksRowKey(t0.Add(5 * time.Second))
	if _, err := index.Insert(ctx, store.Entity{PartitionKey: store.MinutePartitionKey(t0), RowKey: orphan + "_cam-gone",
		Properties: store.Properties{images.PropDeviceID: "cam-gone", images.PropMetadataRowKey: orphan}}); err != nil {
		t.Fatal(err)
	}
	view, err := fleet.Open(fleet.Options{Repo: repo, Embedded: db})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var resume *store.Cursor
	for {
		imgs, next, err := view.Moment(ctx, t0, t0.Add(time.Minute), 2, resume)
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range imgs {
			got[img.CameraID] = img.BlobURI
		}
		if resume = next; resume == nil {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for cam, blob := range want {
		if got[cam] != blob {
			t.Fatalf("read %v, want %v", got, want)
		}
	}
}
