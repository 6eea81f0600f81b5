package retention_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
)

// TestStoreFromBeforeTalliesPurgesExactly opens testdata/pretally-v1, a
// store the build before tallies wrote (see TestWritePreTallyStore): the
// engine backfills the tallies and its first purge deletes, and counts,
// exactly the rows before the cutoff.
func TestStoreFromBeforeTalliesPurgesExactly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "pretally-v1"))); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(pebble.Options{Dir: dir, Logger: quickOptions().Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{Base: db, Opts: quickOptions(), Harness: pebbleHarness}
	f.OpenEngine(t, db)
	f.Run(t)
	boundary := preTallyStart.Add(24 * time.Hour)
	j := f.Purge(t, retention.StartRequest{Kinds: images.Kinds, Cutoff: boundary})
	if j.State != retention.Succeeded {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	var want retention.Counts
	for _, kind := range images.Kinds {
		n := int64(preTallyCameras[kind])
		perCamera := int64(24 * time.Hour / preTallyEvery)
		want.DevicesTotal += n
		want.DevicesDone += n
		want.MetadataRows += n * perCamera
		want.IndexRows += n * perCamera
		if got := f.Census(t, kind, boundary); got != (census{PrimaryNew: n * perCamera, IndexNew: n * perCamera}) {
			t.Errorf("%s after the purge: %+v", kind, got)
		}
	}
	wantCounts(t, "first purge after the backfill", j.Totals(), want)
}
