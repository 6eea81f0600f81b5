package retention_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
)

// TestEmbeddedPurgeRunsWithoutTheQueue: on the embedded store a purge,
// in one section or in many, deletes exactly the expired rows of every
// camera and writes no task and no queue message.
func TestEmbeddedPurgeRunsWithoutTheQueue(t *testing.T) {
	for _, perSection := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("section-cameras-%d", perSection), func(t *testing.T) {
			opts := quickOptions()
			opts.SectionCameras = perSection
			f := newFixture(t, opts)
			const cameras = 5
			f.seed(t, cameras)
			f.run(t)
			j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
			if j.State != retention.Succeeded {
				t.Fatalf("job %s: %s", j.State, j.Error)
			}
			wantCounts(t, "purge", j.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
				MetadataRows: cameras * expiredPerCamera, IndexRows: cameras * expiredPerCamera})
			if got := f.census(t, images.Single, j.Boundary()); got != (census{primaryNew: cameras * keptPerCamera, indexNew: cameras * keptPerCamera}) {
				t.Fatalf("after the purge %+v", got)
			}
			for _, name := range []string{retention.DefaultTasksTable, retention.DefaultQueueTable} {
				tbl, err := f.base.Table(t.Context(), name)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(rows(t, tbl)); n != 0 {
					t.Errorf("%s holds %d rows; the embedded purge needs none", name, n)
				}
			}
		})
	}
}

// TestEmbeddedDryRunCountsWhatThePurgeDeletes: a dry run reads the tallies
// alone and counts what the purge then deletes, with policies too.
func TestEmbeddedDryRunCountsWhatThePurgeDeletes(t *testing.T) {
	f := newFixture(t, quickOptions())
	f.seed(t, 4)
	f.run(t)
	kinds := []images.Kind{images.Single, images.Pano}
	dry := f.purge(t, retention.StartRequest{Kinds: kinds, Cutoff: cutoff, DryRun: true})
	if got := f.census(t, images.Single, dry.Boundary()); got.primaryOld != 4*expiredPerCamera {
		t.Fatalf("a dry run deleted rows: %+v", got)
	}
	real := f.purge(t, retention.StartRequest{Kinds: kinds, Cutoff: cutoff})
	wantCounts(t, "dry run", dry.Totals(), real.Totals())
	wantCounts(t, "purge", real.Totals(), retention.Counts{DevicesTotal: 2 * 4, DevicesDone: 2 * 4,
		MetadataRows: 2 * 4 * expiredPerCamera, IndexRows: 2 * 4 * expiredPerCamera})
}

// TestEmbeddedLateOldImagesAreWhollyBeforeOrAfter: writers create images
// older than the cutoff, of cameras in every section, while purges run in
// sections of two cameras. Each such image is either deleted and counted
// with both its rows or kept with both: counts equal what was there less
// what is left, and every row keeps its partner.
func TestEmbeddedLateOldImagesAreWhollyBeforeOrAfter(t *testing.T) {
	opts := quickOptions()
	opts.SectionCameras = 2
	f := newFixture(t, opts)
	const cameras = 9
	f.seed(t, cameras)
	f.run(t)
	repo := f.repo(images.Single)
	primary, index := repo.Tables()
	boundary := cutoff.Truncate(time.Minute)
	for round := range 3 {
		before := f.census(t, images.Single, boundary)
		var created, seq atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for {
					select {
					case <-stop:
						return
					default:
					}
					// Distinct instants, so that no create is a retry of another.
					img := images.Image{CameraID: fmt.Sprintf("cam-%03d", rng.IntN(cameras+2)),
						CapturedAt: base.Add(-time.Duration(round*1_000_000+int(seq.Add(1))) * 10 * time.Millisecond)}
					if _, err := repo.Create(context.Background(), img); err != nil {
						t.Error(err)
						return
					}
					created.Add(1)
				}
			})
		}
		j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		close(stop)
		wg.Wait()
		if j.State != retention.Succeeded {
			t.Fatalf("round %d: job %s: %s", round, j.State, j.Error)
		}
		after := f.census(t, images.Single, boundary)
		deleted := before.primaryOld + created.Load() - after.primaryOld
		if c := j.Totals(); c.MetadataRows != deleted || c.IndexRows != deleted {
			t.Errorf("round %d: counted %d primary and %d index rows; %d were deleted", round, c.MetadataRows, c.IndexRows, deleted)
		}
		if after.primaryOld != after.indexOld || after.primaryNew != after.indexNew {
			t.Errorf("round %d: rows without their partner: %+v", round, after)
		}
		for _, e := range rows(t, primary) {
			keys := repo.IndexKeys(e.PartitionKey, e.RowKey)
			if _, err := index.Get(t.Context(), keys[0].PartitionKey, keys[0].RowKey); err != nil {
				t.Fatalf("round %d: primary row %s/%s has no index row: %v", round, e.PartitionKey, e.RowKey, err)
			}
		}
	}
}

// TestEmbeddedPurgeThatCannotCommitFailsAndFreesItsKinds: a purge whose
// batch the store refuses every time ends failed, at once, and the next
// purge of the same kind runs.
func TestEmbeddedPurgeThatCannotCommitFailsAndFreesItsKinds(t *testing.T) {
	f := newFixture(t, quickOptions())
	f.seed(t, 3)
	var refuse atomic.Bool
	refuse.Store(true)
	f.openEngine(t, &hookedBackend{Backend: f.base, before: func(_, op string, _ []store.Key) error {
		if op == "exclusive" && refuse.Load() {
			return errors.New("test: a damaged sstable")
		}
		return nil
	}})
	f.run(t)
	j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if j.State != retention.Failed {
		t.Fatalf("job %s; want failed", j.State)
	}
	if got := f.census(t, images.Single, j.Boundary()); got.primaryOld != 3*expiredPerCamera || got.indexOld != 3*expiredPerCamera {
		t.Fatalf("a failed purge deleted rows: %+v", got)
	}
	refuse.Store(false)
	j = f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if j.State != retention.Succeeded {
		t.Fatalf("the next purge: %s (%s)", j.State, j.Error)
	}
	wantCounts(t, "next purge", j.Totals(), retention.Counts{DevicesTotal: 3, DevicesDone: 3,
		MetadataRows: 3 * expiredPerCamera, IndexRows: 3 * expiredPerCamera})
}

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
	f := &fixture{base: db, opts: quickOptions()}
	f.openEngine(t, db)
	f.run(t)
	boundary := preTallyStart.Add(24 * time.Hour)
	j := f.purge(t, retention.StartRequest{Kinds: images.Kinds, Cutoff: boundary})
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
		if got := f.census(t, kind, boundary); got != (census{primaryNew: n * perCamera, indexNew: n * perCamera}) {
			t.Errorf("%s after the purge: %+v", kind, got)
		}
	}
	wantCounts(t, "first purge after the backfill", j.Totals(), want)
}

// TestEmbeddedCancelAfterSomeSectionsLeavesNoOrphan: a purge cancelled
// between its sections ends cancelled with the counts of what it deleted,
// every deleted row's index row gone with it (the range deletion of the
// index was the last section's), and the next purge deletes the rest.
func TestEmbeddedCancelAfterSomeSectionsLeavesNoOrphan(t *testing.T) {
	opts := quickOptions()
	opts.SectionCameras = 1
	f := newFixture(t, opts)
	const cameras = 5
	f.seed(t, cameras)
	var sections atomic.Int32
	reached, release := make(chan struct{}), make(chan struct{})
	f.openEngine(t, &hookedBackend{Backend: f.base, before: func(_, op string, _ []store.Key) error {
		// The first batch is the try at one section, which five cameras
		// overflow; two sections of one camera follow.
		if op == "exclusive" && sections.Add(1) == 4 {
			close(reached)
			<-release
		}
		return nil
	}})
	f.run(t)
	boundary := cutoff.Truncate(time.Minute)
	before := f.census(t, images.Single, boundary)
	started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(patience):
		t.Fatal("the purge never reached its third section")
	}
	if _, err := f.engine.Cancel(t.Context(), started.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	j := f.await(t, started.ID)
	if j.State != retention.Cancelled {
		t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
	}
	after := f.census(t, images.Single, boundary)
	c := j.Totals()
	if c.DevicesDone != 2 || c.MetadataRows != before.primaryOld-after.primaryOld || c.IndexRows != before.indexOld-after.indexOld {
		t.Errorf("cancelled job counts %+v; %d primary and %d index rows are gone, of two cameras", c,
			before.primaryOld-after.primaryOld, before.indexOld-after.indexOld)
	}
	if after.primaryOld != after.indexOld || after.primaryOld != (cameras-2)*expiredPerCamera {
		t.Errorf("after the cancel %+v: want the three cameras left with both rows, none of the two purged", after)
	}
	next := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if n := next.Totals(); next.State != retention.Succeeded || n.MetadataRows+c.MetadataRows != before.primaryOld || n.IndexRows+c.IndexRows != before.indexOld {
		t.Errorf("next purge %s: %+v; with the cancelled one's, want every expired row", next.State, n)
	}
	if got := f.census(t, images.Single, boundary); got.primaryOld != 0 || got.indexOld != 0 {
		t.Errorf("after the next purge %+v", got)
	}
}

// TestEmbeddedCancelledThenRestartedDeletesItsOrphans: a purge is
// cancelled after two of its sections and the process dies before its
// orphans pass; the restarted engine ends it cancelled, with no index row
// of a deleted row left.
func TestEmbeddedCancelledThenRestartedDeletesItsOrphans(t *testing.T) {
	opts := quickOptions()
	opts.SectionCameras = 1
	f := newFixture(t, opts)
	const cameras = 5
	f.seed(t, cameras)
	var sections atomic.Int32
	var dead atomic.Bool
	var cancelErr error
	var id atomic.Value
	f.openEngine(t, &hookedBackend{Backend: f.base, before: func(_, op string, _ []store.Key) error {
		if dead.Load() {
			return errDead
		}
		// The first batch is the try at one section; two sections follow.
		if op == "exclusive" && sections.Add(1) == 4 {
			// The engine may reach its third section before Start has
			// returned the job's id to this test.
			for deadline := time.Now().Add(patience); id.Load() == nil && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			jobID, _ := id.Load().(string)
			_, cancelErr = f.engine.Cancel(context.Background(), jobID)
			dead.Store(true)
			return errDead
		}
		return nil
	}})
	f.run(t)
	boundary := cutoff.Truncate(time.Minute)
	before := f.census(t, images.Single, boundary)
	started, err := f.engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	id.Store(started.ID)
	for deadline := time.Now().Add(patience); !dead.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the purge never reached its third section")
		}
	}
	f.stop()
	if cancelErr != nil {
		t.Fatal(cancelErr)
	}
	f.openEngine(t, f.base)
	f.run(t)
	j := f.await(t, started.ID)
	if j.State != retention.Cancelled {
		t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
	}
	after := f.census(t, images.Single, boundary)
	if c := j.Totals(); c.MetadataRows != before.primaryOld-after.primaryOld || c.IndexRows != before.indexOld-after.indexOld {
		t.Errorf("counts %+v; %d primary and %d index rows are gone", c, before.primaryOld-after.primaryOld, before.indexOld-after.indexOld)
	}
	if after.primaryOld != after.indexOld || after.primaryOld != (cameras-2)*expiredPerCamera {
		t.Errorf("after the restart %+v: want three cameras left with both rows, no orphan", after)
	}
}

// TestEmbeddedPurgeFailingAtAnySectionCountsWhatItDeleted fails each
// section of a purge in turn (the store refuses its batch): the job ends
// failed with exactly the rows it deleted counted, primary and index
// alike, each camera once; no index row is left without its primary row
// (the orphans pass deleted those whose range deletion never came); and
// the next purge deletes, and counts, the rest.
func TestEmbeddedPurgeFailingAtAnySectionCountsWhatItDeleted(t *testing.T) {
	const cameras = 5
	// The first batch is the try at one section, which five cameras
	// overflow; five sections of one camera follow, the last of them
	// covering every camera.
	for failAt := 2; failAt <= cameras+1; failAt++ {
		t.Run(fmt.Sprintf("section %d", failAt-1), func(t *testing.T) {
			opts := quickOptions()
			opts.SectionCameras = 1
			f := newFixture(t, opts)
			f.seed(t, cameras)
			var batches atomic.Int32
			f.openEngine(t, &hookedBackend{Backend: f.base, before: func(_, op string, _ []store.Key) error {
				if op == "exclusive" && batches.Add(1) == int32(failAt) {
					return errors.New("test: the store refuses this section")
				}
				return nil
			}})
			f.run(t)
			boundary := cutoff.Truncate(time.Minute)
			before := f.census(t, images.Single, boundary)
			j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
			if j.State != retention.Failed {
				t.Fatalf("state %s, want failed", j.State)
			}
			after := f.census(t, images.Single, boundary)
			c := j.Totals()
			purged := int64(failAt - 2)
			want := retention.Counts{DevicesTotal: purged, DevicesDone: purged, MetadataRows: purged * expiredPerCamera, IndexRows: purged * expiredPerCamera}
			wantCounts(t, "failed purge", c, want)
			if gone := before.primaryOld - after.primaryOld; gone != c.MetadataRows {
				t.Errorf("%d primary rows gone, %d counted", gone, c.MetadataRows)
			}
			if gone := before.indexOld - after.indexOld; gone != c.IndexRows {
				t.Errorf("%d index rows gone, %d counted", gone, c.IndexRows)
			}
			f.checkEveryIndexRowHasItsPrimary(t, images.Single)
			next := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
			rest := int64(cameras) - purged
			wantCounts(t, "next purge", next.Totals(), retention.Counts{DevicesTotal: rest, DevicesDone: rest,
				MetadataRows: rest * expiredPerCamera, IndexRows: rest * expiredPerCamera})
			if got := f.census(t, images.Single, boundary); got.primaryOld != 0 || got.indexOld != 0 {
				t.Errorf("after the next purge %+v", got)
			}
		})
	}
}

// checkEveryIndexRowHasItsPrimary checks that the kind's primary rows and
// the rows its index rows name are the same.
func (f *fixture) checkEveryIndexRowHasItsPrimary(t *testing.T, kind images.Kind) {
	t.Helper()
	have := f.primaryRowKeys(t, kind)
	for camera, keys := range f.indexedRowKeys(t, kind) {
		slices.Sort(keys)
		slices.Sort(have[camera])
		if !slices.Equal(keys, have[camera]) {
			t.Errorf("%s %s: index rows name %v, primary rows are %v", kind, camera, keys, have[camera])
		}
	}
}

// TestEmbeddedCountsEachCameraOnce: a camera an earlier section purged
// that gets an old image before the last section, which meets every
// camera again, is purged again there, its rows counted, but it is one
// camera of the job's devices_total and devices_done, not two.
func TestEmbeddedCountsEachCameraOnce(t *testing.T) {
	opts := quickOptions()
	opts.SectionCameras = 1
	f := newFixture(t, opts)
	const cameras = 4
	f.seed(t, cameras)
	repo := f.repo(images.Single)
	var batches atomic.Int32
	f.openEngine(t, &hookedBackend{Backend: f.base, before: func(_, op string, _ []store.Key) error {
		// Batches: the try at one section, then cam-000's, and cam-001's.
		if op != "exclusive" || batches.Add(1) != 3 {
			return nil
		}
		// The create waits for no section: this hook runs before one takes the store.
		_, err := repo.Create(context.Background(), images.Image{CameraID: "cam-000", CapturedAt: base.Add(-time.Hour)})
		return err
	}})
	f.run(t)
	j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	wantCounts(t, "purge", j.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
		MetadataRows: cameras*expiredPerCamera + 1, IndexRows: cameras*expiredPerCamera + 1})
	if got := f.census(t, images.Single, cutoff.Truncate(time.Minute)); got.primaryOld != 0 || got.indexOld != 0 {
		t.Errorf("after the purge %+v", got)
	}
}
