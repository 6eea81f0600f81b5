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

// testLateOldImageIsWhollyPurgedOrWhollyKept: at each point of a purge in
// turn (before a camera's first primary delete, between a batch's primary
// and index deletes, as the janitor begins) an image with an expired
// capture time is created for that camera. Either the purge takes it, both
// rows deleted and counted, or it keeps both rows for the next purge,
// which retires it: never its primary row without its index row.
func testLateOldImageIsWhollyPurgedOrWhollyKept(t *testing.T, ts *suite) {
	t.Parallel() // independent: stores and engines of its own
	points := []struct {
		name string
		// at says whether a write is the point, for the kind's tables.
		at func(primary, index, table, op string) bool
		// janitor: the point is the janitor's start, not a write.
		janitor bool
	}{
		{"before a primary delete", func(primary, _, table, op string) bool { return table == primary && op == "batch-delete" }, false},
		{"between primary and index deletes", func(_, index, table, op string) bool { return table == index && op == "batch-delete" }, false},
		{"as the janitor begins", nil, true},
	}
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		for _, point := range points {
			t.Run(point.name, func(t *testing.T) {
				opts := quickOptions()
				// No redelivery: a task that outlasts a short timeout on a
				// loaded machine is delivered again, and its count is then
				// only a lower bound, which is not what this test is about.
				opts.VisibilityTimeout = patience
				f := ts.open(t, opts)
				primary, index := f.Repo(images.Single).Tables()
				direct, err := images.Open(t.Context(), f.Base, images.Options{Kind: images.Single})
				if err != nil {
					t.Fatal(err)
				}
				late := images.Image{CameraID: "cam-000", CapturedAt: base.Add(7 * time.Second)}
				var written atomic.Bool
				write := func() {
					if !written.CompareAndSwap(false, true) {
						return
					}
					if _, err := direct.Create(t.Context(), late); err != nil {
						t.Errorf("late create: %v", err)
					}
				}
				hooked := &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
					if point.at != nil && point.at(primary.Name(), index.Name(), table, op) && len(keys) > 0 &&
						(keys[0].PartitionKey == late.CameraID || table == index.Name()) {
						write()
					}
					return nil
				}}
				f.OpenEngine(t, hooked)
				if point.janitor {
					f.Hooks.Janitor = func(string, images.Kind) { write() }
				}
				f.Seed(t, cameras)
				f.Run(t)

				first := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				if !written.Load() {
					t.Fatal("the late image was never written")
				}
				if first.State != retention.Succeeded {
					t.Fatalf("first purge: %s (%s)", first.State, first.Error)
				}
				rk := store.InvertedTicksRowKey(late.CapturedAt)
				indexKey := store.Key{PartitionKey: store.MinutePartitionKey(late.CapturedAt), RowKey: images.IndexRowKey(rk, late.CameraID)}
				_, perr := primary.Get(t.Context(), late.CameraID, rk)
				_, ierr := index.Get(t.Context(), indexKey.PartitionKey, indexKey.RowKey)
				taken := errors.Is(perr, store.ErrNotFound)
				switch {
				case perr != nil && !taken:
					t.Fatal(perr)
				case taken && !errors.Is(ierr, store.ErrNotFound):
					t.Fatalf("the late image's primary row went, its index row: %v", ierr)
				case !taken && ierr != nil:
					t.Fatalf("the late image's primary row stays, its index row: %v; it would never expire", ierr)
				}
				want := expiredCounts(1)
				if taken {
					want.MetadataRows++
					want.IndexRows++
				}
				wantCounts(t, "first purge", first.Totals(), want)
				if point.janitor && taken {
					t.Error("the janitor took a row younger than IndexLag")
				}

				time.Sleep(testIndexLag) // the late row settles
				second := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				if second.State != retention.Succeeded {
					t.Fatalf("second purge: %s (%s)", second.State, second.Error)
				}
				want = retention.Counts{}
				if !taken {
					want = retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: 1, IndexRows: 1}
				}
				wantCounts(t, "second purge", second.Totals(), want)
				if got := f.Census(t, images.Single, first.Boundary()); got.PrimaryOld != 0 || got.IndexOld != 0 {
					t.Errorf("expired rows left after the next purge: %+v", got)
				}
			})
		}
	})
}
