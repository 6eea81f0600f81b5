package retentiontest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// testFleetIndexKeysArePurged: an index written partly by the fleet, whose
// row keys are <camera>_<row key>, and partly by this service, with cameras
// whose 19-digit ids read as row keys, is purged exactly as one of this
// service's own: the purge reads keys, falls back on the DeviceId where a
// key does not tell, and never mistakes a camera id for a row key.
func testFleetIndexKeysArePurged(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		n := seedFleetKeys(t, f)
		f.Run(t)
		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if j.State != retention.Succeeded {
			t.Fatalf("state %s (%s)", j.State, j.Error)
		}
		wantCounts(t, "job", j.Totals(), retention.Counts{DevicesTotal: n, DevicesDone: n,
			MetadataRows: n * expiredPerCamera, IndexRows: n * expiredPerCamera})
		got := f.Census(t, images.Single, j.Boundary())
		if want := (Census{PrimaryNew: n * keptPerCamera, IndexNew: n * keptPerCamera}); got != want {
			t.Errorf("after purge: %+v, want %+v", got, want)
		}
	})
}

// seedFleetKeys writes an index partly in the fleet's key form and partly
// in this service's, with cameras whose 19-digit ids read as row keys, and
// returns how many cameras it wrote.
func seedFleetKeys(t *testing.T, f *Fixture) int64 {
	t.Helper()
	repo := f.Seeders(t)[images.Single-1]
	_, index := repo.Tables()
	// A camera id of 19 digits is a valid row key, of the year 6090.
	const nineteenDigits = "1234567890123456789"
	cameraIDs := []string{"cam-own", nineteenDigits, "cam-fleet", "1234567890123456780"}
	for c, camera := range cameraIDs {
		for s := 0; s < 240; s += 20 {
			img, err := repo.Create(t.Context(), images.Image{CameraID: camera, CapturedAt: base.Add(time.Duration(s) * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			if c%2 == 0 && camera != nineteenDigits {
				continue
			}
			// The fleet's key form for every other camera and the
			// 19-digit one; its own 19-digit sibling keeps this
			// service's form.
			if camera == "1234567890123456780" {
				continue
			}
			partition := images.IndexPartitionKey(img.CapturedAt, camera, 0)
			if err := index.Delete(t.Context(), partition, images.IndexRowKey(img.RowKey, camera), ""); err != nil {
				t.Fatal(err)
			}
			if _, err := index.Insert(t.Context(), store.Entity{PartitionKey: partition, RowKey: camera + "_" + img.RowKey,
				Properties: store.Properties{images.PropDeviceID: camera, images.PropMetadataRowKey: img.RowKey}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.LastCreate = f.Now()
	f.Settle()
	return int64(len(cameraIDs))
}

// testWorkersDeleteIndexRowsInBothKeyForms: on the queue design the
// workers delete their cameras' index rows by derived key, in whichever
// form each has, after the primary rows: when the janitor begins, no index
// row of a purged camera's expired rows is left in either form.
func testWorkersDeleteIndexRowsInBothKeyForms(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		// No redelivery: one cut short between a batch's primary and index
		// deletes rightly leaves those index rows to the janitor.
		opts.VisibilityTimeout = patience
		f := ts.open(t, opts)
		n := seedFleetKeys(t, f)
		var atJanitor atomic.Pointer[Census]
		f.Hooks.Janitor = func(string, images.Kind) {
			c := f.Census(t, images.Single, base.Add(2*time.Minute))
			atJanitor.CompareAndSwap(nil, &c)
		}
		f.Run(t)
		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if j.State != retention.Succeeded {
			t.Fatalf("state %s (%s)", j.State, j.Error)
		}
		wantCounts(t, "job", j.Totals(), retention.Counts{DevicesTotal: n, DevicesDone: n,
			MetadataRows: n * expiredPerCamera, IndexRows: n * expiredPerCamera})
		got := atJanitor.Load()
		if got == nil {
			t.Fatal("the janitor never ran")
		}
		if want := (Census{PrimaryNew: n * keptPerCamera, IndexNew: n * keptPerCamera}); *got != want {
			t.Errorf("as the janitor begins: %+v, want %+v", *got, want)
		}
	})
}
