package retentiontest

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

const cameras = 5

// The fixture per kind: cameras x 12 images, 20 s apart from base; the
// boundary (start of the cutoff's minute) is base+2m, so 6 images per
// camera are expired and 6 are not, 2 of which lie in the cutoff's minute
// before the cutoff itself.
const expiredPerCamera, keptPerCamera = 6, 6

func wantCounts(t *testing.T, what string, got retention.Counts, want retention.Counts) {
	t.Helper()
	if got != want {
		t.Errorf("%s: counts %+v, want %+v", what, got, want)
	}
}

// wantCountsAfterFaults is wantCounts for a purge that met a crash or lost
// store answers and no create: its counts are exact, but a delete whose
// record was lost rightly flags the primary rows' count as a lower bound
// (see TestUnrecordedDeleteFlagsItsCount), which nothing here made short.
func wantCountsAfterFaults(t *testing.T, what string, got retention.Counts, want retention.Counts) {
	t.Helper()
	got.MetadataRowsLowerBound = false
	wantCounts(t, what, got, want)
}

func expiredCounts(kinds int) retention.Counts {
	return retention.Counts{
		DevicesTotal: int64(kinds * cameras), DevicesDone: int64(kinds * cameras),
		MetadataRows: int64(kinds * cameras * expiredPerCamera), IndexRows: int64(kinds * cameras * expiredPerCamera),
	}
}

// testPurgeRetiresExactlyTheExpired proves invariant 1 on both write paths:
// every row of a purged kind captured before the cutoff's minute is gone,
// no row captured at or after it is touched, other kinds are untouched, and
// the counts are exact.
func testPurgeRetiresExactlyTheExpired(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		// The embedded driver deletes by range and by key in exclusive
		// batches; the queue design in plain batches, on Pebble too.
		for _, plain := range []bool{ts.h.Queue} {
			t.Run(map[bool]string{false: "range and key deletes", true: "batches only"}[plain], func(t *testing.T) {
				f := ts.open(t, quickOptions())
				f.OpenEngine(t, &HookedBackend{Backend: f.Base, Plain: plain})
				f.Seed(t, cameras)
				f.Run(t)
				j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single, images.Pano}, Cutoff: cutoff})
				if j.State != retention.Succeeded {
					t.Fatalf("state %s (%s)", j.State, j.Error)
				}
				wantCounts(t, "job", j.Totals(), expiredCounts(2))
				boundary := j.Boundary()
				if !boundary.Equal(base.Add(2 * time.Minute)) {
					t.Fatalf("boundary %s", boundary)
				}
				for _, kind := range []images.Kind{images.Single, images.Pano} {
					got := f.Census(t, kind, boundary)
					want := Census{PrimaryNew: cameras * keptPerCamera, IndexNew: cameras * keptPerCamera}
					if got != want {
						t.Errorf("%s after purge: %+v, want %+v", kind, got, want)
					}
				}
				untouched := Census{PrimaryOld: cameras * expiredPerCamera, PrimaryNew: cameras * keptPerCamera,
					IndexOld: cameras * expiredPerCamera, IndexNew: cameras * keptPerCamera}
				if got := f.Census(t, images.PreStitch, boundary); got != untouched {
					t.Errorf("pre-stitch, not purged: %+v, want %+v", got, untouched)
				}
			})
		}
	})
}

// testIndexRowGoesOnlyAfterItsPrimary proves invariant 2: whenever an index
// row is deleted, its primary row is already gone. That includes an image
// with an expired capture time written after its camera's rows were
// deleted (a camera uploading a backlog): its index row must stay.
func testIndexRowGoesOnlyAfterItsPrimary(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		for _, plain := range []bool{false, true} {
			t.Run(map[bool]string{false: "range and key deletes", true: "batches only"}[plain], func(t *testing.T) {
				f := ts.open(t, quickOptions())
				primary, index := f.Repo(images.Single).Tables()
				var indexDeletes atomic.Int64 // workers delete index rows at once
				late := images.Image{CameraID: "cam-000", CapturedAt: base.Add(10 * time.Second)}
				// The job is updated by the purge and by its lease renewal at once.
				var lateWritten atomic.Bool
				hooked := &HookedBackend{Backend: f.Base, Plain: plain, Before: func(table, op string, keys []store.Key) error {
					if table == retention.DefaultJobsTable && !lateWritten.Load() && allTasksDone(t, f.Base) && lateWritten.CompareAndSwap(false, true) {
						// Every camera's rows are deleted; the janitor has not begun.
						direct, err := images.Open(t.Context(), f.Base, images.Options{Kind: images.Single})
						if err == nil {
							_, err = direct.Create(t.Context(), late)
						}
						if err != nil {
							t.Errorf("late create: %v", err)
						}
					}
					if table != index.Name() || (op != "delete-keys" && op != "batch-delete" && op != "delete-partitions") {
						return nil
					}
					if op == "delete-partitions" {
						// Whole partitions: every row they hold now goes.
						var rowKeys []store.Key
						for _, k := range keys {
							for _, e := range partitionRows(t, index, k.PartitionKey) {
								rowKeys = append(rowKeys, key(e))
							}
						}
						keys = rowKeys
					}
					for _, k := range keys {
						row, err := index.Get(t.Context(), k.PartitionKey, k.RowKey)
						if errors.Is(err, store.ErrNotFound) {
							continue
						}
						device, rk := row.Properties[images.PropDeviceID].(string), row.Properties[images.PropMetadataRowKey].(string)
						if _, err := primary.Get(t.Context(), device, rk); !errors.Is(err, store.ErrNotFound) {
							t.Errorf("index row %s/%s deleted while its primary row %s/%s exists (%v)", k.PartitionKey, k.RowKey, device, rk, err)
						}
						indexDeletes.Add(1)
					}
					return nil
				}}
				f.OpenEngine(t, hooked)
				f.Seed(t, cameras)
				f.Run(t)
				j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
				if j.State != retention.Succeeded || indexDeletes.Load() != cameras*expiredPerCamera {
					t.Fatalf("state %s, %d index rows checked, want %d", j.State, indexDeletes.Load(), cameras*expiredPerCamera)
				}
				if !lateWritten.Load() {
					t.Fatal("the late image was never written")
				}
				rk := store.InvertedTicksRowKey(late.CapturedAt)
				if _, err := primary.Get(t.Context(), late.CameraID, rk); err != nil {
					t.Errorf("late image's primary row: %v", err)
				}
				if _, err := index.Get(t.Context(), store.MinutePartitionKey(late.CapturedAt), images.IndexRowKey(rk, late.CameraID)); err != nil {
					t.Errorf("late image's index row: %v; want it kept for the next purge", err)
				}
			})
		}
	})
}

// testDryRunDeletesNothing proves invariant 4: a dry run reports what a real
// run then deletes, and deletes nothing itself.
func testDryRunDeletesNothing(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		f.Seed(t, cameras)
		f.Run(t)
		var before []Census
		for _, kind := range images.Kinds {
			before = append(before, f.Census(t, kind, base.Add(2*time.Minute)))
		}
		dry := f.Purge(t, retention.StartRequest{Kinds: images.Kinds, Cutoff: cutoff, DryRun: true})
		if dry.State != retention.Succeeded || !dry.DryRun {
			t.Fatalf("dry run: %s (%s)", dry.State, dry.Error)
		}
		for i, kind := range images.Kinds {
			if got := f.Census(t, kind, base.Add(2*time.Minute)); got != before[i] {
				t.Errorf("%s after a dry run: %+v, want %+v", kind, got, before[i])
			}
		}
		real := f.Purge(t, retention.StartRequest{Kinds: images.Kinds, Cutoff: cutoff})
		wantCounts(t, "dry run", dry.Totals(), real.Totals())
		wantCounts(t, "real run", real.Totals(), expiredCounts(3))
	})
}

// testOverlappingPurgeIsRefused: at most one running purge per kind.
func testOverlappingPurgeIsRefused(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		f.Seed(t, 1)
		// Without Run the first job stays pending, holding its lock.
		first, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Pano, images.Single}, Cutoff: cutoff})
		var running *retention.RunningError
		if !errors.As(err, &running) || running.JobID != first.ID || running.Kind != images.Single {
			t.Fatalf("overlapping start: %v, want a RunningError naming %s", err, first.ID)
		}
		if _, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Pano}, Cutoff: cutoff}); err != nil {
			t.Fatalf("a purge of another kind: %v", err)
		}
		if _, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff, DryRun: true}); err != nil {
			t.Fatalf("a dry run beside a running purge: %v", err)
		}
		jobs, _, err := f.Engine.List(t.Context(), 10, nil)
		if err != nil || len(jobs) != 3 {
			t.Fatalf("jobs after a refused start: %d, %v; want the refused one not recorded", len(jobs), err)
		}
		f.Run(t)
		if j := f.Await(t, first.ID); j.State != retention.Succeeded {
			t.Fatalf("first job: %s", j.State)
		}
		if _, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff}); err != nil {
			t.Fatalf("a purge after the first ended: %v", err)
		}
	})
}

// testFailedCameraIsCountedAndRetried: a camera whose deletes keep failing
// is counted failed, keeps its rows (index rows included) and is purged by
// the next purge.
func testFailedCameraIsCountedAndRetried(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		// Read by the engine's workers, written by the test.
		var broken atomic.Bool
		broken.Store(true)
		primary, _ := f.Repo(images.Single).Tables()
		hooked := &HookedBackend{Backend: f.Base, Before: func(table, op string, keys []store.Key) error {
			if !broken.Load() || table != primary.Name() || (op != "batch-delete") {
				return nil
			}
			if slices.ContainsFunc(keys, func(k store.Key) bool { return k.PartitionKey == "cam-003" }) {
				return errors.New("injected: disk error")
			}
			return nil
		}}
		f.OpenEngine(t, hooked)
		f.Seed(t, cameras)
		f.Run(t)
		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if j.State != retention.Failed || j.Error == "" {
			t.Fatalf("state %s (%q), want failed with a reason", j.State, j.Error)
		}
		failedGroup := int64(1)
		want := retention.Counts{DevicesTotal: cameras, DevicesDone: cameras - failedGroup, DevicesFailed: failedGroup,
			MetadataRows: (cameras - failedGroup) * expiredPerCamera, IndexRows: (cameras - failedGroup) * expiredPerCamera}
		wantCounts(t, "failed job", j.Totals(), want)
		left := f.Census(t, images.Single, j.Boundary())
		if left.PrimaryOld != failedGroup*expiredPerCamera || left.IndexOld != failedGroup*expiredPerCamera {
			t.Fatalf("after the failed purge %+v; want the failed cameras' rows kept, index included", left)
		}

		broken.Store(false)
		again := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if again.State != retention.Succeeded {
			t.Fatalf("retry: %s (%s)", again.State, again.Error)
		}
		wantCounts(t, "retry", again.Totals(), retention.Counts{DevicesTotal: failedGroup, DevicesDone: failedGroup,
			MetadataRows: failedGroup * expiredPerCamera, IndexRows: failedGroup * expiredPerCamera})
		if got := f.Census(t, images.Single, j.Boundary()); got.PrimaryOld != 0 || got.IndexOld != 0 {
			t.Fatalf("after the retry %+v", got)
		}
	})
}

// testPurgeShardedIndex: with the index spread over shard partitions
// (yyyyMMddHHmm_<n>), the expired partitions are still one range and the
// purge retires exactly the expired rows.
func testPurgeShardedIndex(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		f.Shards = 3
		f.OpenEngine(t, f.Base)
		f.Seed(t, cameras)
		f.Run(t)
		_, index := f.Repo(images.Single).Tables()
		shards := map[string]bool{}
		for _, e := range rows(t, index) {
			minute, shard, ok := strings.Cut(e.PartitionKey, "_")
			if !ok || len(minute) != 12 {
				t.Fatalf("index partition %q is not yyyyMMddHHmm_<shard>", e.PartitionKey)
			}
			shards[shard] = true
		}
		if len(shards) < 2 {
			t.Fatalf("%d cameras landed in shards %v; want them spread", cameras, shards)
		}
		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
		if j.State != retention.Succeeded {
			t.Fatalf("state %s (%s)", j.State, j.Error)
		}
		wantCounts(t, "sharded purge", j.Totals(), expiredCounts(1))
		if got := f.Census(t, images.Single, j.Boundary()); got != (Census{PrimaryNew: cameras * keptPerCamera, IndexNew: cameras * keptPerCamera}) {
			t.Fatalf("after purge %+v", got)
		}
	})
}

// allTasksDone reports whether the store holds purge tasks and all are done.
func allTasksDone(t *testing.T, backend store.Backend) bool {
	t.Helper()
	tasks, err := backend.Table(t.Context(), queue.DefaultTasksTable)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range rows(t, tasks) {
		doc, ok := task.Properties["Doc"].(string)
		if !ok {
			continue // the row of the job's lease holder, not a task
		}
		if n++; !strings.Contains(doc, `"done":true`) {
			return false
		}
	}
	return n > 0
}

// partitionRows reads every row of one partition.
func partitionRows(t *testing.T, tbl store.Table, partitionKey string) []store.Entity {
	t.Helper()
	var out []store.Entity
	q := store.Query{PartitionKey: partitionKey}
	for {
		page, err := tbl.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Entities...)
		if page.Next == nil {
			return out
		}
		q.Resume = page.Next
	}
}
