package retentiontest

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// testRecreatedRowGoesWithItsIndexRow: a worker has deleted a batch of a
// camera's primary rows and is about to delete their index rows by their
// derived keys when a retried create of one of those images writes its
// index row and its primary row again. The worker must not leave that
// primary row without its index row: it reads the range again and deletes
// both, counting them.
func testRecreatedRowGoesWithItsIndexRow(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		direct, err := images.Open(t.Context(), f.Base, images.Options{Kind: images.Single})
		if err != nil {
			t.Fatal(err)
		}
		primary, index := direct.Tables()
		var rewritten atomic.Pointer[images.Image]
		var once atomic.Bool // workers run tasks at once
		hooked := &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
			if table != index.Name() || op != "batch-delete" || !once.CompareAndSwap(false, true) {
				return nil
			}
			row, err := index.Get(t.Context(), keys[0].PartitionKey, keys[0].RowKey)
			if err != nil {
				t.Errorf("index row about to be deleted: %v", err)
				return nil
			}
			device, _ := row.Properties[images.PropDeviceID].(string)
			rk, _ := row.Properties[images.PropMetadataRowKey].(string)
			at, err := store.TimeFromInvertedTicksRowKey(rk)
			if err != nil {
				t.Errorf("index row's primary key: %v", err)
				return nil
			}
			if _, err := primary.Get(t.Context(), device, rk); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("index row deleted before its primary row: %v", err)
			}
			img := images.Image{CameraID: device, CapturedAt: at}
			if _, err := direct.Create(t.Context(), img); err != nil {
				t.Errorf("retried create: %v", err)
				return nil
			}
			rewritten.Store(&img)
			return nil
		}}
		f.OpenEngine(t, hooked)
		f.Seed(t, cameras)
		f.Run(t)

		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if rewritten.Load() == nil {
			t.Fatal("no image was created again between a batch's primary and index deletes")
		}
		if j.State != retention.Succeeded {
			t.Fatalf("purge: %s (%s)", j.State, j.Error)
		}
		want := expiredCounts(1)
		want.MetadataRows++ // the row deleted twice, once per create
		want.IndexRows++
		wantCounts(t, "purge", j.Totals(), want)
		if got := f.Census(t, images.Single, j.Boundary()); got.PrimaryOld != 0 || got.IndexOld != 0 {
			t.Errorf("expired rows left: %+v", got)
		}
	})
}

// testRewrittenOrphanSurvivesTheJanitor: the janitor finds an old index row
// whose primary row is missing and decides to delete it; before its delete
// runs, a retried create of the same image rewrites the index row and
// writes the primary row. The delete, at the ETag the janitor read, must
// leave the rewritten row, or the primary row would never expire; both go
// in the next purge.
func testRewrittenOrphanSurvivesTheJanitor(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		direct, err := images.Open(t.Context(), f.Base, images.Options{Kind: images.Single})
		if err != nil {
			t.Fatal(err)
		}
		primary, index := direct.Tables()
		orphan := images.Image{CameraID: "cam-000", CapturedAt: base.Add(7 * time.Second)}
		img, err := direct.Create(t.Context(), orphan)
		if err != nil {
			t.Fatal(err)
		}
		// A create that wrote its index row and gave up before its primary row.
		if err := primary.Delete(t.Context(), img.CameraID, img.RowKey, ""); err != nil {
			t.Fatal(err)
		}
		indexKey := store.Key{PartitionKey: store.MinutePartitionKey(img.CapturedAt), RowKey: images.IndexRowKey(img.RowKey, img.CameraID)}
		var janitor, rewritten atomic.Bool
		hooked := &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
			if !janitor.Load() || table != index.Name() || op != "batch-delete" || keys[0] != indexKey || !rewritten.CompareAndSwap(false, true) {
				return nil
			}
			if _, err := direct.Create(t.Context(), orphan); err != nil {
				t.Errorf("retried create: %v", err)
			}
			return nil
		}}
		f.OpenEngine(t, hooked)
		f.Hooks.Janitor = func(string, images.Kind) { janitor.Store(true) }
		f.Seed(t, cameras)
		f.Run(t)

		first := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if !rewritten.Load() {
			t.Fatal("the janitor never came to delete the orphan")
		}
		if first.State != retention.Succeeded {
			t.Fatalf("first purge: %s (%s)", first.State, first.Error)
		}
		wantCounts(t, "first purge", first.Totals(), expiredCounts(1))
		if _, err := primary.Get(t.Context(), img.CameraID, img.RowKey); err != nil {
			t.Fatalf("the retried create's primary row: %v", err)
		}
		if _, err := index.Get(t.Context(), indexKey.PartitionKey, indexKey.RowKey); err != nil {
			t.Fatalf("the rewritten index row after the janitor: %v; its primary row would never expire", err)
		}

		time.Sleep(testIndexLag)
		second := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if second.State != retention.Succeeded {
			t.Fatalf("second purge: %s (%s)", second.State, second.Error)
		}
		wantCounts(t, "second purge", second.Totals(), retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: 1, IndexRows: 1})
		if got := f.Census(t, images.Single, first.Boundary()); got.PrimaryOld != 0 || got.IndexOld != 0 {
			t.Errorf("expired rows left after the next purge: %+v", got)
		}
	})
}

// testJanitorDeletesOnlySettledOrphans: index rows in the expired
// partitions whose primary rows never landed (creates that gave up) go in
// the janitor pass if older than IndexLag, uncounted; a younger one, whose
// primary row may still land, stays for the next purge.
func testJanitorDeletesOnlySettledOrphans(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		repo := f.Seeders(t)[images.Single-1]
		primary, index := repo.Tables()
		// An orphan is what a create leaves that wrote its index row and
		// gave up before its primary row.
		orphan := func(camera string, at time.Time) (store.Key, error) {
			img, err := repo.Create(t.Context(), images.Image{CameraID: camera, CapturedAt: at})
			if err == nil {
				err = primary.Delete(t.Context(), img.CameraID, img.RowKey, "")
			}
			return store.Key{PartitionKey: store.MinutePartitionKey(img.CapturedAt), RowKey: images.IndexRowKey(img.RowKey, img.CameraID)}, err
		}
		old, err := orphan("cam-001", base.Add(7*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		f.Seed(t, cameras) // and waits until the old orphan has settled
		var young atomic.Pointer[store.Key]
		f.Hooks.Janitor = func(string, images.Kind) {
			if young.Load() != nil {
				return
			}
			k, err := orphan("cam-002", base.Add(9*time.Second))
			if err != nil {
				t.Errorf("young orphan: %v", err)
			}
			young.Store(&k)
		}
		f.Run(t)

		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if j.State != retention.Succeeded {
			t.Fatalf("purge: %s (%s)", j.State, j.Error)
		}
		wantCounts(t, "purge", j.Totals(), expiredCounts(1))
		if _, err := index.Get(t.Context(), old.PartitionKey, old.RowKey); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the settled orphan: %v, want it deleted", err)
		}
		if young.Load() == nil {
			t.Fatal("the janitor never ran")
		}
		if _, err := index.Get(t.Context(), young.Load().PartitionKey, young.Load().RowKey); err != nil {
			t.Errorf("the young orphan: %v, want it kept", err)
		}
		if got := f.Census(t, images.Single, j.Boundary()); got != (Census{PrimaryNew: cameras * keptPerCamera, IndexOld: 1, IndexNew: cameras * keptPerCamera}) {
			t.Errorf("after purge: %+v", got)
		}
	})
}
