package retention_test

import (
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestStatsAndStatus checks what monitoring reads: the engine's counts of
// ended jobs and deleted rows by table, and the store's view of the last
// successful purge, the retention it applied and each kind's oldest row.
func TestStatsAndStatus(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		f := newFixture(t, quickOptions())
		f.seed(t, cameras)
		f.run(t)

		st, err := f.engine.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.LastSucceeded) != 0 || st.Retention != 0 {
			t.Errorf("before any purge: last succeeded %v, retention %s; want none", st.LastSucceeded, st.Retention)
		}
		if got := st.Oldest[images.Single]; !got.Equal(base) {
			t.Errorf("oldest single row %s, want %s", got, base)
		}

		dry := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff, DryRun: true})
		j := f.purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single, images.Pano}, Cutoff: cutoff})
		if dry.State != retention.Succeeded || j.State != retention.Succeeded {
			t.Fatalf("states %s, %s", dry.State, j.State)
		}

		stats := f.statsOnceEnded(t, func(ended map[retention.State]int64) bool { return ended[retention.Succeeded] >= 2 })
		if stats.Ended[retention.Succeeded] != 2 || stats.Ended[retention.Failed] != 0 || stats.DevicesFailed != 0 {
			t.Errorf("ended %v, devices failed %d; want 2 succeeded", stats.Ended, stats.DevicesFailed)
		}
		want := map[string]int64{}
		for _, kind := range []images.Kind{images.Single, images.Pano} {
			primary, index := f.repo(kind).Tables()
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

		if st, err = f.engine.Status(t.Context()); err != nil {
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
