package retention_test

import (
	"errors"
	"math"
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
// the partition after it landed (the fenced range deletion must refuse
// then), the image keeps its index row, the counts are exactly the seeded
// rows, and the next purge retires it.
func TestLateOldImageKeepsItsIndexRowAtEverySweepStep(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		for _, step := range retention.SweepSteps() {
			t.Run(step, func(t *testing.T) {
				f := newFixture(t, quickOptions())
				retention.ReadEverySweep(f.engine) // the sweep a plan prepared: below
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

// TestLateOldImageKeepsItsIndexRowThroughAPreparedSweep is the test above
// for a sweep its plan prepared (the embedded store's): the plan's fence,
// its scan, the work, and each step of the chunks it deletes whole. An
// image written late in any of them is deleted whole, primary and index
// row, or keeps its index row: never a primary row without it, the counts
// exactly what went, and the next purge retires what stayed.
func TestLateOldImageKeepsItsIndexRowThroughAPreparedSweep(t *testing.T) {
	for _, step := range retention.PlannedSweepSteps() {
		t.Run(step, func(t *testing.T) {
			f := newFixture(t, quickOptions())
			f.seed(t, cameras)
			writer := f.seeders(t)[images.Single-1]
			var late atomic.Pointer[images.Image]
			var prepared atomic.Bool
			retention.SetSweepHook(f.engine, func(at string, partitions store.Range) {
				if at == "worked" {
					prepared.Store(true)
				}
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
					if at == "plan-scanned" {
						// Into a partition the scan has read already.
						if !minute.After(base) {
							return
						}
						minute = minute.Add(-time.Minute)
					}
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
				t.Fatalf("the purge never reached step %s", step)
			}
			if !prepared.Load() {
				t.Fatal("the sweep did not take its plan's chunks")
			}
			if first.State != retention.Succeeded {
				t.Fatalf("first purge: %s (%s)", first.State, first.Error)
			}
			primary, index := f.repo(images.Single).Tables()
			indexKey := store.Key{PartitionKey: store.MinutePartitionKey(img.CapturedAt), RowKey: images.IndexRowKey(img.RowKey, img.CameraID)}
			gone := func(tbl store.Table, pk, rk string) int64 {
				_, err := tbl.Get(t.Context(), pk, rk)
				if errors.Is(err, store.ErrNotFound) {
					return 1
				}
				if err != nil {
					t.Fatal(err)
				}
				return 0
			}
			primaryGone, indexGone := gone(primary, img.CameraID, img.RowKey), gone(index, indexKey.PartitionKey, indexKey.RowKey)
			if primaryGone == 0 && indexGone == 1 {
				t.Fatal("the late image's index row went without its primary row; the primary row would never expire")
			}
			want := expiredCounts(1)
			want.MetadataRows += primaryGone
			want.IndexRows += indexGone
			wantCounts(t, "first purge", first.Totals(), want)

			time.Sleep(testIndexLag)
			second := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
			if second.State != retention.Succeeded {
				t.Fatalf("second purge: %s (%s)", second.State, second.Error)
			}
			left := 1 - indexGone
			wantCounts(t, "second purge", second.Totals(), retention.Counts{DevicesTotal: left, DevicesDone: left, MetadataRows: 1 - primaryGone, IndexRows: left})
			if gone(primary, img.CameraID, img.RowKey) != 1 || gone(index, indexKey.PartitionKey, indexKey.RowKey) != 1 {
				t.Error("the late image outlived the next purge")
			}
		})
	}
}

// TestCrashAfterAPreparedChunkIsAnnouncedCountsItsLateRow: an image written
// late, after the plan's scan read its partition and before its camera's
// rows are deleted,
// loses both rows to the purge; the store dies once the chunk holding its
// index row is announced, before the chunk's deletion. The restarted sweep
// reads the chunk and deletes the rows the plan counted and the late one:
// its count must be all of them, not the plan's.
func TestCrashAfterAPreparedChunkIsAnnouncedCountsItsLateRow(t *testing.T) {
	opts := quickOptions()
	opts.GroupSize = cameras + 1 // one task, made as the plan's scan ends
	f := newFixture(t, opts)
	f.seed(t, cameras)
	crash := &crashAfter{n: math.MaxInt, fs: f.fs}
	f.openEngine(t, transactingBackend{&hookedBackend{Backend: f.base, before: crash.before, after: crash.after}})
	writer := f.seeders(t)[images.Single-1]
	var late atomic.Pointer[images.Image]
	retention.SetSweepHook(f.engine, func(at string, partitions store.Range) {
		switch {
		case at == "plan-scanned" && partitions.From > store.MinutePartitionKey(base) && late.Load() == nil:
			// Into the first partition, which the scan has read: the plan
			// does not count the image, its camera's task deletes its
			// primary row.
			img, err := writer.Create(t.Context(), images.Image{CameraID: "cam-000", CapturedAt: base.Add(7 * time.Second)})
			if err != nil {
				t.Errorf("late create: %v", err)
				return
			}
			late.Store(&img)
		case at == "announced" && late.Load() != nil:
			crash.kill()
		}
	})
	f.run(t)
	j, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	waitCrashed(t, f, crash, j.ID)
	f.stop()
	if !crash.dead {
		t.Fatal("the sweep never announced a prepared chunk")
	}
	restarted := f.reopen(t, crash.crashed)
	restarted.run(t)
	j = restarted.await(t, j.ID)
	if j.State != retention.Succeeded {
		t.Fatalf("resumed job: %s (%s)", j.State, j.Error)
	}
	want := expiredCounts(1)
	want.MetadataRows++
	want.IndexRows++
	wantCountsAfterFaults(t, "resumed job", j.Totals(), want)
	img := late.Load()
	primary, index := restarted.repo(images.Single).Tables()
	if _, err := primary.Get(t.Context(), img.CameraID, img.RowKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the late image's primary row: %v, want it deleted", err)
	}
	pk, rk := store.MinutePartitionKey(img.CapturedAt), images.IndexRowKey(img.RowKey, img.CameraID)
	if _, err := index.Get(t.Context(), pk, rk); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("its index row: %v, want it deleted", err)
	}
}
