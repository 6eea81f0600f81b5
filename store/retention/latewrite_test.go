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

// TestLateOldImageKeepsItsIndexRowAtEverySweepStep: at each step of the
// sweep in turn, an image with an expired capture time is created for a
// camera whose rows were just purged, in the index partition the sweep is
// working on. Whether the sweep reads it, judges without it, or deletes
// the partition's rows after it landed, the image keeps its index row, the counts are exactly the seeded
// rows, and the next purge retires it.
func TestLateOldImageKeepsItsIndexRowAtEverySweepStep(t *testing.T) {
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		for _, step := range retention.SweepSteps() {
			t.Run(step, func(t *testing.T) {
				f := newFixture(t, quickOptions())
				f.seed(t, cameras)
				writer := f.seeders(t)[images.Single-1]
				var late atomic.Pointer[images.Image]
				retention.SetSweepHook(f.engine, func(at string, partitions store.Range) {
					if at != step || late.Load() != nil {
						return
					}
					minute := base
					if p := partitions.From; len(p) >= 12 {
						m, err := time.Parse("200601021504", p[:12])
						if err != nil || !m.Before(base.Add(2*time.Minute)) {
							return
						}
						minute = m
					}
					img, err := writer.Create(t.Context(), images.Image{CameraID: "cam-000", CapturedAt: minute.Add(7 * time.Second)})
					if err != nil {
						t.Errorf("late create at step %s: %v", at, err)
						return
					}
					late.Store(&img)
				})
				f.run(t)

				first := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				img := late.Load()
				if img == nil {
					t.Fatalf("the sweep never reached step %s", step)
				}
				if first.State != retention.Succeeded {
					t.Fatalf("first purge: %s (%s)", first.State, first.Error)
				}
				wantCounts(t, "first purge", first.Totals(), expiredCounts(1))
				primary, index := f.repo(images.Single).Tables()
				indexKey := store.Key{PartitionKey: store.MinutePartitionKey(img.CapturedAt), RowKey: images.IndexRowKey(img.RowKey, img.CameraID)}
				if _, err := primary.Get(t.Context(), img.CameraID, img.RowKey); err != nil {
					t.Fatalf("the late image's primary row: %v", err)
				}
				if _, err := index.Get(t.Context(), indexKey.PartitionKey, indexKey.RowKey); err != nil {
					t.Fatalf("the late image's index row after the sweep: %v; its primary row would never expire", err)
				}

				time.Sleep(testIndexLag) // the late row settles, as the sweep requires
				second := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				if second.State != retention.Succeeded {
					t.Fatalf("second purge: %s (%s)", second.State, second.Error)
				}
				wantCounts(t, "second purge", second.Totals(), retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: 1, IndexRows: 1})
				if _, err := primary.Get(t.Context(), img.CameraID, img.RowKey); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the late image's primary row after the next purge: %v, want it expired", err)
				}
				if _, err := index.Get(t.Context(), indexKey.PartitionKey, indexKey.RowKey); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("its index row after the next purge: %v, want it expired", err)
				}
			})
		}
	})
}
