package retentiontest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// testEmbeddedPurgeRunsWithoutTheQueue: on the embedded store a purge,
// in one section or in many, deletes exactly the expired rows of every
// camera and writes no task and no queue message.
func testEmbeddedPurgeRunsWithoutTheQueue(t *testing.T, ts *suite) {
	for _, perSection := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("section-cameras-%d", perSection), func(t *testing.T) {
			opts := quickOptions()
			opts.SectionCameras = perSection
			f := ts.open(t, opts)
			const cameras = 5
			f.Seed(t, cameras)
			f.Run(t)
			j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
			if j.State != retention.Succeeded {
				t.Fatalf("job %s: %s", j.State, j.Error)
			}
			wantCounts(t, "purge", j.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
				MetadataRows: cameras * expiredPerCamera, IndexRows: cameras * expiredPerCamera})
			if got := f.Census(t, images.Single, j.Boundary()); got != (Census{PrimaryNew: cameras * keptPerCamera, IndexNew: cameras * keptPerCamera}) {
				t.Fatalf("after the purge %+v", got)
			}
			for _, name := range []string{queue.DefaultTasksTable, queue.DefaultQueueTable} {
				tbl, err := f.Base.Table(t.Context(), name)
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

// testEmbeddedDryRunCountsWhatThePurgeDeletes: a dry run reads the tallies
// alone and counts what the purge then deletes, with policies too.
func testEmbeddedDryRunCountsWhatThePurgeDeletes(t *testing.T, ts *suite) {
	f := ts.open(t, quickOptions())
	f.Seed(t, 4)
	f.Run(t)
	kinds := []images.Kind{images.Single, images.Pano}
	dry := f.Purge(t, retention.StartRequest{Kinds: kinds, Cutoff: cutoff, DryRun: true})
	if got := f.Census(t, images.Single, dry.Boundary()); got.PrimaryOld != 4*expiredPerCamera {
		t.Fatalf("a dry run deleted rows: %+v", got)
	}
	real := f.Purge(t, retention.StartRequest{Kinds: kinds, Cutoff: cutoff})
	wantCounts(t, "dry run", dry.Totals(), real.Totals())
	wantCounts(t, "purge", real.Totals(), retention.Counts{DevicesTotal: 2 * 4, DevicesDone: 2 * 4,
		MetadataRows: 2 * 4 * expiredPerCamera, IndexRows: 2 * 4 * expiredPerCamera})
}

// testEmbeddedLateOldImagesAreWhollyBeforeOrAfter: writers create images
// older than the cutoff, of cameras in every section, while purges run in
// sections of two cameras. Each such image is either deleted and counted
// with both its rows or kept with both: counts equal what was there less
// what is left, and every row keeps its partner.
func testEmbeddedLateOldImagesAreWhollyBeforeOrAfter(t *testing.T, ts *suite) {
	opts := quickOptions()
	opts.SectionCameras = 2
	f := ts.open(t, opts)
	const cameras = 9
	f.Seed(t, cameras)
	f.Run(t)
	repo := f.Repo(images.Single)
	primary, index := repo.Tables()
	boundary := cutoff.Truncate(time.Minute)
	for round := range 3 {
		before := f.Census(t, images.Single, boundary)
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
		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		close(stop)
		wg.Wait()
		if j.State != retention.Succeeded {
			t.Fatalf("round %d: job %s: %s", round, j.State, j.Error)
		}
		after := f.Census(t, images.Single, boundary)
		deleted := before.PrimaryOld + created.Load() - after.PrimaryOld
		if c := j.Totals(); c.MetadataRows != deleted || c.IndexRows != deleted {
			t.Errorf("round %d: counted %d primary and %d index rows; %d were deleted", round, c.MetadataRows, c.IndexRows, deleted)
		}
		if after.PrimaryOld != after.IndexOld || after.PrimaryNew != after.IndexNew {
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

// testEmbeddedPurgeThatCannotCommitFailsAndFreesItsKinds: a purge whose
// batch the store refuses every time ends failed, at once, and the next
// purge of the same kind runs.
func testEmbeddedPurgeThatCannotCommitFailsAndFreesItsKinds(t *testing.T, ts *suite) {
	f := ts.open(t, quickOptions())
	f.Seed(t, 3)
	var refuse atomic.Bool
	refuse.Store(true)
	f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(_, op string, _ []store.Key) error {
		if op == "exclusive" && refuse.Load() {
			return errors.New("test: a damaged sstable")
		}
		return nil
	}})
	f.Run(t)
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if j.State != retention.Failed {
		t.Fatalf("job %s; want failed", j.State)
	}
	if got := f.Census(t, images.Single, j.Boundary()); got.PrimaryOld != 3*expiredPerCamera || got.IndexOld != 3*expiredPerCamera {
		t.Fatalf("a failed purge deleted rows: %+v", got)
	}
	refuse.Store(false)
	j = f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if j.State != retention.Succeeded {
		t.Fatalf("the next purge: %s (%s)", j.State, j.Error)
	}
	wantCounts(t, "next purge", j.Totals(), retention.Counts{DevicesTotal: 3, DevicesDone: 3,
		MetadataRows: 3 * expiredPerCamera, IndexRows: 3 * expiredPerCamera})
}

// testEmbeddedCancelAfterSomeSectionsLeavesNoOrphan: a purge cancelled
// between its sections ends cancelled with the counts of what it deleted,
// every deleted row's index row gone with it (the range deletion of the
// index was the last section's), and the next purge deletes the rest.
func testEmbeddedCancelAfterSomeSectionsLeavesNoOrphan(t *testing.T, ts *suite) {
	opts := quickOptions()
	opts.SectionCameras = 1
	f := ts.open(t, opts)
	const cameras = 5
	f.Seed(t, cameras)
	var sections atomic.Int32
	reached, release := make(chan struct{}), make(chan struct{})
	f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(_, op string, _ []store.Key) error {
		// The first batch is the try at one section, which five cameras
		// overflow; two sections of one camera follow.
		if op == "exclusive" && sections.Add(1) == 4 {
			close(reached)
			<-release
		}
		return nil
	}})
	f.Run(t)
	boundary := cutoff.Truncate(time.Minute)
	before := f.Census(t, images.Single, boundary)
	started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(patience):
		t.Fatal("the purge never reached its third section")
	}
	if _, err := f.Engine.Cancel(t.Context(), started.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	j := f.Await(t, started.ID)
	if j.State != retention.Cancelled {
		t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
	}
	after := f.Census(t, images.Single, boundary)
	c := j.Totals()
	if c.DevicesDone != 2 || c.MetadataRows != before.PrimaryOld-after.PrimaryOld || c.IndexRows != before.IndexOld-after.IndexOld {
		t.Errorf("cancelled job counts %+v; %d primary and %d index rows are gone, of two cameras", c,
			before.PrimaryOld-after.PrimaryOld, before.IndexOld-after.IndexOld)
	}
	if after.PrimaryOld != after.IndexOld || after.PrimaryOld != (cameras-2)*expiredPerCamera {
		t.Errorf("after the cancel %+v: want the three cameras left with both rows, none of the two purged", after)
	}
	next := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if n := next.Totals(); next.State != retention.Succeeded || n.MetadataRows+c.MetadataRows != before.PrimaryOld || n.IndexRows+c.IndexRows != before.IndexOld {
		t.Errorf("next purge %s: %+v; with the cancelled one's, want every expired row", next.State, n)
	}
	if got := f.Census(t, images.Single, boundary); got.PrimaryOld != 0 || got.IndexOld != 0 {
		t.Errorf("after the next purge %+v", got)
	}
}

// testEmbeddedCancelledThenRestartedDeletesItsOrphans: a purge is
// cancelled after two of its sections and the process dies before its
// orphans pass; the restarted engine ends it cancelled, with no index row
// of a deleted row left.
func testEmbeddedCancelledThenRestartedDeletesItsOrphans(t *testing.T, ts *suite) {
	opts := quickOptions()
	opts.SectionCameras = 1
	f := ts.open(t, opts)
	const cameras = 5
	f.Seed(t, cameras)
	var sections atomic.Int32
	var dead atomic.Bool
	var cancelErr error
	var id atomic.Value
	f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(_, op string, _ []store.Key) error {
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
			_, cancelErr = f.Engine.Cancel(context.Background(), jobID)
			dead.Store(true)
			return errDead
		}
		return nil
	}})
	f.Run(t)
	boundary := cutoff.Truncate(time.Minute)
	before := f.Census(t, images.Single, boundary)
	started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	id.Store(started.ID)
	for deadline := time.Now().Add(patience); !dead.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the purge never reached its third section")
		}
	}
	f.Stop()
	if cancelErr != nil {
		t.Fatal(cancelErr)
	}
	f.OpenEngine(t, f.Base)
	f.Run(t)
	j := f.Await(t, started.ID)
	if j.State != retention.Cancelled {
		t.Fatalf("state %s (%s), want cancelled", j.State, j.Error)
	}
	after := f.Census(t, images.Single, boundary)
	if c := j.Totals(); c.MetadataRows != before.PrimaryOld-after.PrimaryOld || c.IndexRows != before.IndexOld-after.IndexOld {
		t.Errorf("counts %+v; %d primary and %d index rows are gone", c, before.PrimaryOld-after.PrimaryOld, before.IndexOld-after.IndexOld)
	}
	if after.PrimaryOld != after.IndexOld || after.PrimaryOld != (cameras-2)*expiredPerCamera {
		t.Errorf("after the restart %+v: want three cameras left with both rows, no orphan", after)
	}
}

// testEmbeddedPurgeFailingAtAnySectionCountsWhatItDeleted fails each
// section of a purge in turn (the store refuses its batch): the job ends
// failed with exactly the rows it deleted counted, primary and index
// alike, each camera once; no index row is left without its primary row
// (the orphans pass deleted those whose range deletion never came); and
// the next purge deletes, and counts, the rest.
func testEmbeddedPurgeFailingAtAnySectionCountsWhatItDeleted(t *testing.T, ts *suite) {
	const cameras = 5
	// The first batch is the try at one section, which five cameras
	// overflow; five sections of one camera follow, the last of them
	// covering every camera.
	for failAt := 2; failAt <= cameras+1; failAt++ {
		t.Run(fmt.Sprintf("section %d", failAt-1), func(t *testing.T) {
			opts := quickOptions()
			opts.SectionCameras = 1
			f := ts.open(t, opts)
			f.Seed(t, cameras)
			var batches atomic.Int32
			f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(_, op string, _ []store.Key) error {
				if op == "exclusive" && batches.Add(1) == int32(failAt) {
					return errors.New("test: the store refuses this section")
				}
				return nil
			}})
			f.Run(t)
			boundary := cutoff.Truncate(time.Minute)
			before := f.Census(t, images.Single, boundary)
			j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
			if j.State != retention.Failed {
				t.Fatalf("state %s, want failed", j.State)
			}
			after := f.Census(t, images.Single, boundary)
			c := j.Totals()
			purged := int64(failAt - 2)
			want := retention.Counts{DevicesTotal: purged, DevicesDone: purged, MetadataRows: purged * expiredPerCamera, IndexRows: purged * expiredPerCamera}
			wantCounts(t, "failed purge", c, want)
			if gone := before.PrimaryOld - after.PrimaryOld; gone != c.MetadataRows {
				t.Errorf("%d primary rows gone, %d counted", gone, c.MetadataRows)
			}
			if gone := before.IndexOld - after.IndexOld; gone != c.IndexRows {
				t.Errorf("%d index rows gone, %d counted", gone, c.IndexRows)
			}
			f.CheckEveryIndexRowHasItsPrimary(t, images.Single)
			next := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
			rest := int64(cameras) - purged
			wantCounts(t, "next purge", next.Totals(), retention.Counts{DevicesTotal: rest, DevicesDone: rest,
				MetadataRows: rest * expiredPerCamera, IndexRows: rest * expiredPerCamera})
			if got := f.Census(t, images.Single, boundary); got.PrimaryOld != 0 || got.IndexOld != 0 {
				t.Errorf("after the next purge %+v", got)
			}
		})
	}
}

// CheckEveryIndexRowHasItsPrimary checks that the kind's primary rows and
// the rows its index rows name are the same.
func (f *Fixture) CheckEveryIndexRowHasItsPrimary(t *testing.T, kind images.Kind) {
	t.Helper()
	have := f.PrimaryRowKeys(t, kind)
	for camera, keys := range f.IndexedRowKeys(t, kind) {
		slices.Sort(keys)
		slices.Sort(have[camera])
		if !slices.Equal(keys, have[camera]) {
			t.Errorf("%s %s: index rows name %v, primary rows are %v", kind, camera, keys, have[camera])
		}
	}
}

// testEmbeddedCountsEachCameraOnce: a camera an earlier section purged
// that gets an old image before the last section, which meets every
// camera again, is purged again there, its rows counted, but it is one
// camera of the job's devices_total and devices_done, not two.
func testEmbeddedCountsEachCameraOnce(t *testing.T, ts *suite) {
	opts := quickOptions()
	opts.SectionCameras = 1
	f := ts.open(t, opts)
	const cameras = 4
	f.Seed(t, cameras)
	repo := f.Repo(images.Single)
	var batches atomic.Int32
	f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: func(_, op string, _ []store.Key) error {
		// Batches: the try at one section, then cam-000's, and cam-001's.
		if op != "exclusive" || batches.Add(1) != 3 {
			return nil
		}
		// The create waits for no section: this hook runs before one takes the store.
		_, err := repo.Create(context.Background(), images.Image{CameraID: "cam-000", CapturedAt: base.Add(-time.Hour)})
		return err
	}})
	f.Run(t)
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	wantCounts(t, "purge", j.Totals(), retention.Counts{DevicesTotal: cameras, DevicesDone: cameras,
		MetadataRows: cameras*expiredPerCamera + 1, IndexRows: cameras*expiredPerCamera + 1})
	if got := f.Census(t, images.Single, cutoff.Truncate(time.Minute)); got.PrimaryOld != 0 || got.IndexOld != 0 {
		t.Errorf("after the purge %+v", got)
	}
}
