package retentiontest

import (
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// testStatsAndStatus checks what monitoring reads: the engine's counts of
// ended jobs and deleted rows by table, and the store's view of the last
// successful purge, the retention it applied and each kind's oldest row.
func testStatsAndStatus(t *testing.T, ts *suite) {
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		f := ts.open(t, quickOptions())
		f.Seed(t, cameras)
		f.Run(t)

		st, err := f.Engine.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.LastSucceeded) != 0 || st.Retention != 0 {
			t.Errorf("before any purge: last succeeded %v, retention %s; want none", st.LastSucceeded, st.Retention)
		}
		if got := st.Oldest[images.Single]; !got.Equal(base) {
			t.Errorf("oldest single row %s, want %s", got, base)
		}

		dry := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff, DryRun: true})
		j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single, images.Pano}, Cutoff: cutoff})
		if dry.State != retention.Succeeded || j.State != retention.Succeeded {
			t.Fatalf("states %s, %s", dry.State, j.State)
		}

		stats := f.StatsOnceEnded(t, func(ended map[retention.State]int64) bool { return ended[retention.Succeeded] >= 2 })
		if stats.Ended[retention.Succeeded] != 2 || stats.Ended[retention.Failed] != 0 || stats.DevicesFailed != 0 {
			t.Errorf("ended %v, devices failed %d; want 2 succeeded", stats.Ended, stats.DevicesFailed)
		}
		want := map[string]int64{}
		for _, kind := range []images.Kind{images.Single, images.Pano} {
			primary, index := f.Repo(kind).Tables()
			want[primary.Name()], want[index.Name()] = cameras*expiredPerCamera, cameras*expiredPerCamera
		}
		for table, n := range want {
			if stats.RowsDeleted[table] != n {
				t.Errorf("rows deleted from %s: %d, want %d", table, stats.RowsDeleted[table], n)
			}
		}
		if len(stats.RowsDeleted) != len(want) {
			t.Errorf("rows deleted %v: the dry run or another table counted", stats.RowsDeleted)
		}

		if st, err = f.Engine.Status(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []images.Kind{images.Single, images.Pano} {
			if got := st.LastSucceeded[kind]; !got.Equal(j.Ended) {
				t.Errorf("%s last succeeded %s, want the job's end %s", kind, got, j.Ended)
			}
			if got, want := st.Oldest[kind], base.Add(2*time.Minute); !got.Equal(want) {
				t.Errorf("oldest %s row %s after the purge, want %s", kind, got, want)
			}
		}
		if _, ok := st.LastSucceeded[images.PreStitch]; ok {
			t.Error("pre-stitch has a last successful purge, but none purged it")
		}
		if got := st.Oldest[images.PreStitch]; !got.Equal(base) {
			t.Errorf("oldest pre-stitch row %s, want %s (not purged)", got, base)
		}
		if want := j.Created.Sub(j.Cutoff); st.Retention != want {
			t.Errorf("retention %s, want the job's created minus cutoff %s", st.Retention, want)
		}
	})
}

// testRowsDeletedAdvanceAsThePurgeRuns checks that the engine counts the
// rows a purge deleted as each of its steps is recorded (an embedded
// section, a task), not once the job ends: a long purge shows its progress
// in the metrics. The purge is held at its third step; the first is
// counted, exactly, while the job runs (on the embedded store its primary
// rows: their index rows are deleted, and counted, by the last section).
func testRowsDeletedAdvanceAsThePurgeRuns(t *testing.T, ts *suite) {
	kind := images.Single
	ts.each(t, func(t *testing.T, newFixture func(*testing.T, Options) *Fixture) {
		opts := quickOptions()
		opts.Workers = 1        // one task at a time
		opts.SectionCameras = 2 // sections of two cameras, as tasks are
		opts.GroupSize = 2
		f := ts.open(t, opts)
		f.Seed(t, 6)
		var mu sync.Mutex
		steps := map[string]int{}
		block := newBlockOnce(func(table, op string) bool {
			mu.Lock()
			defer mu.Unlock()
			// The embedded purge's first exclusive batch tries the whole
			// fleet in one section and commits nothing; its sections follow.
			// A task's delivery updates it twice: its count, then its end.
			switch {
			case op == "exclusive":
				steps[op]++
				return steps[op] == 3
			case table == queue.DefaultTasksTable && op == "update":
				steps[op]++
				return steps[op] == 3
			}
			return false
		})
		f.OpenEngine(t, &HookedBackend{Backend: f.Base, Before: block.Before})
		primary, index := f.Repo(kind).Tables()
		f.Run(t)
		started, err := f.Engine.Start(t.Context(), retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		<-block.reached
		deleted := f.Engine.Stats().RowsDeleted
		if j, err := f.Engine.Get(t.Context(), started.ID); err != nil || j.State.Terminal() {
			t.Fatalf("job %+v, %v: want it running", j, err)
		}
		// The embedded purge's index rows go by the last section's range
		// deletion, and count when it commits; the queue design's go with
		// each task.
		indexDeleted := int64(2 * expiredPerCamera)
		if !f.QueueDesign() {
			indexDeleted = 0
		}
		if deleted[primary.Name()] != 2*expiredPerCamera || deleted[index.Name()] != indexDeleted {
			t.Errorf("rows deleted while the purge runs: %v, want two cameras' %d from %s and %d from %s",
				deleted, 2*expiredPerCamera, primary.Name(), indexDeleted, index.Name())
		}
		close(block.release)
		j := f.Await(t, started.ID)
		if j.State != retention.Succeeded {
			t.Fatalf("state %s (%s)", j.State, j.Error)
		}
		deleted = f.StatsOnceEnded(t, func(ended map[retention.State]int64) bool { return ended[retention.Succeeded] == 1 }).RowsDeleted
		if deleted[primary.Name()] != 6*expiredPerCamera || deleted[index.Name()] != 6*expiredPerCamera {
			t.Errorf("rows deleted once the purge ended: %v, want six cameras' %d each", deleted, 6*expiredPerCamera)
		}
	})
}
