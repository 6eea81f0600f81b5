package retention_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// writePreTally rewrites testdata/pretally-v1; see TestStoreFromBeforeTalliesPurgesExactly.
var writePreTally = flag.Bool("write-pretally", false, "write testdata/pretally-v1 with this build")

// preTally is what testdata/pretally-v1 holds: per kind, cameras with an
// image every half hour for two days from preTallyStart.
var (
	preTallyStart   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	preTallyCameras = map[images.Kind]int{images.Single: 6, images.Pano: 2, images.PreStitch: 2}
)

const preTallyEvery = 30 * time.Minute

func preTallyImages(kind images.Kind) []images.Image {
	var out []images.Image
	for c := range preTallyCameras[kind] {
		for at := preTallyStart; at.Before(preTallyStart.Add(48 * time.Hour)); at = at.Add(preTallyEvery) {
			img := images.Image{CameraID: fmt.Sprintf("cam-%03d", c), CapturedAt: at.Add(time.Duration(c) * time.Second),
				BlobURI: "https://blobs.example/x.jpg", ContentType: "image/jpeg", SizeBytes: 1000, Width: 640, Height: 480}
			if kind == images.PreStitch {
				img.PanoImageCorrelationID = fmt.Sprintf("pano-%d", at.Unix())
			}
			out = append(out, img)
		}
	}
	return out
}

// TestWritePreTallyStore writes testdata/pretally-v1 when asked
// (-write-pretally): it was written by the build before tallies (commit
// 0b08a37), and must not be rewritten by a later one.
func TestWritePreTallyStore(t *testing.T) {
	if !*writePreTally {
		t.Skip("writes testdata only with -write-pretally")
	}
	dir := filepath.Join("testdata", "pretally-v1")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// A small memtable: the log file is preallocated to its size.
	db, err := pebble.Open(pebble.Options{Dir: dir, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, kind := range images.Kinds {
		r, err := images.Open(ctx, db, images.Options{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range preTallyImages(kind) {
			if _, err := r.Create(ctx, img); err != nil {
				t.Fatal(err)
			}
		}
	}
}
