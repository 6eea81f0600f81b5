package retention_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestRewrittenIndexRowSurvivesTheSweep: the sweep finds an expired index
// row whose primary row is gone and decides to delete it; before its delete
// runs, a retried create of the same image rewrites the index row and
// writes the primary row again. The delete must leave the rewritten row, or
// the primary row would never expire; both go in the next purge.
func TestRewrittenIndexRowSurvivesTheSweep(t *testing.T) {
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		for _, plain := range []bool{false, true} {
			t.Run(map[bool]string{false: "range and key deletes", true: "batches only"}[plain], func(t *testing.T) {
				f := newFixture(t, quickOptions())
				direct, err := images.Open(t.Context(), f.base, images.Options{Kind: images.Single})
				if err != nil {
					t.Fatal(err)
				}
				primary, index := direct.Tables()
				var rewritten atomic.Pointer[images.Image]
				hooked := &hookedBackend{Backend: f.base, plain: plain, before: func(table, op string, keys []store.Key) error {
					if table != index.Name() || (op != "delete-keys" && op != "batch-delete" && op != "delete-partitions") || rewritten.Load() != nil {
						return nil
					}
					// Checked and about to be deleted (a row, or a whole
					// partition): the create is retried.
					row, err := index.Get(t.Context(), keys[0].PartitionKey, keys[0].RowKey)
					if op == "delete-partitions" {
						var page store.Page
						page, err = index.Scan(t.Context(), store.Scan{Partitions: store.Range{From: keys[0].PartitionKey}, Limit: 1})
						if err == nil && len(page.Entities) == 1 {
							row = page.Entities[0]
						}
					}
					if err != nil {
						t.Errorf("index row to rewrite: %v", err)
						return nil
					}
					device, _ := row.Properties[images.PropDeviceID].(string)
					rk, _ := row.Properties[images.PropMetadataRowKey].(string)
					at, err := store.TimeFromInvertedTicksRowKey(rk)
					if err != nil {
						t.Errorf("index row's primary key: %v", err)
						return nil
					}
					img := images.Image{CameraID: device, CapturedAt: at}
					if _, err := direct.Create(t.Context(), img); err != nil {
						t.Errorf("retried create: %v", err)
						return nil
					}
					rewritten.Store(&img)
					return nil
				}}
				f.openEngine(t, hooked)
				f.seed(t, cameras)
				f.run(t)

				first := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				img := rewritten.Load()
				if img == nil {
					t.Fatal("no index row was rewritten between the sweep's check and its delete")
				}
				if first.State != retention.Succeeded {
					t.Fatalf("first purge: %s (%s)", first.State, first.Error)
				}
				expired := int64(cameras * expiredPerCamera)
				wantCounts(t, "first purge", first.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
					MetadataRows: expired, IndexRows: expired - 1})
				rk := store.InvertedTicksRowKey(img.CapturedAt)
				indexKey := store.Key{PartitionKey: store.MinutePartitionKey(img.CapturedAt), RowKey: images.IndexRowKey(rk, img.CameraID)}
				if _, err := primary.Get(t.Context(), img.CameraID, rk); err != nil {
					t.Fatalf("the retried create's primary row: %v", err)
				}
				if _, err := index.Get(t.Context(), indexKey.PartitionKey, indexKey.RowKey); err != nil {
					t.Fatalf("the rewritten index row after the sweep: %v; its primary row would never expire", err)
				}

				time.Sleep(testIndexLag) // the rewritten row settles, as the sweep requires
				second := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				if second.State != retention.Succeeded {
					t.Fatalf("second purge: %s (%s)", second.State, second.Error)
				}
				wantCounts(t, "second purge", second.Totals(), retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: 1, IndexRows: 1})
				if _, err := primary.Get(t.Context(), img.CameraID, rk); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the retried create's primary row after the next purge: %v, want it expired", err)
				}
				if _, err := index.Get(t.Context(), indexKey.PartitionKey, indexKey.RowKey); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("its index row after the next purge: %v, want it expired", err)
				}
				if got := f.census(t, images.Single, first.Boundary()); got.primaryOld != 0 || got.indexOld != 0 {
					t.Errorf("expired rows left after the next purge: %+v", got)
				}
			})
		}
	})
}
