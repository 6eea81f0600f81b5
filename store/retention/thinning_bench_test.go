package retention_test

import (
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// BenchmarkThinning thins one image a minute of THIN_CAMERAS cameras (100)
// over THIN_DAYS days (7) to one per 15 minutes past the first day: the
// issue's year of 100 cameras scaled to what a benchmark run can load, the
// same work per row. The rows are flushed and compacted first, as rows a
// day old are. Its rows/s (rows deleted per second of the purge with
// policies, from its start to its end) is the figure set beside
// PostgreSQL's DELETE keeping the first row per camera and interval
// (bench/postgres-compare.sh, PARTS=thin). It fails unless the counts are
// exactly the rows the model deletes. Its cpu-s/purge, the process's CPU
// time over the purge, compactions meanwhile included, is the figure to
// compare builds by on a machine shared with other work, where wall time
// follows the others' load.
func BenchmarkThinning(b *testing.B) {
	cameras, days := envInt(b, "THIN_CAMERAS", 100), envInt(b, "THIN_DAYS", 7)
	const every = 15 * time.Minute
	var deleted int64
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		s := openBenchStore(b, nil)
		first := time.Now().UTC().Truncate(every).Add(-policy.Days(days))
		perCamera := int(policy.Days(days) / time.Minute)
		s.seedEveryMinute(b, cameras, first, perCamera)
		if err := s.db.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
		if _, err := s.engine.Policies().CreatePolicy(b.Context(), policy.Policy{Scope: policy.ScopeDefault,
			Tiers: map[images.Kind][]policy.Tier{images.Single: {{AfterDays: 1, KeepOnePer: every}}}}); err != nil {
			b.Fatal(err)
		}
		s.run(b)
		b.StartTimer()
		began := cpuTime()
		j, err := s.engine.Start(b.Context(), retention.StartRequest{Kinds: []images.Kind{images.Single}, UsePolicies: true})
		if err != nil {
			b.Fatal(err)
		}
		j = s.await(b, j.ID)
		b.StopTimer()
		cpu += cpuTime() - began
		// The window is [first, the job's instant less a day, floored to 15
		// minutes): a camera keeps one image of each of its intervals there
		// and every image after it.
		thinned := int(j.Created.Add(-policy.Days(1)).Truncate(every).Sub(first) / time.Minute)
		want := int64(cameras * (thinned - thinned/int(every/time.Minute)))
		if got := j.Totals(); j.State != retention.Succeeded || got.MetadataRows != want || got.ThinnedRows != want || got.IndexRows != want {
			b.Fatalf("job %s %s: %+v, want %d rows thinned, each with its index row", j.ID, j.State, got, want)
		}
		deleted += want
		s.close()
	}
	b.ReportMetric(float64(deleted)/float64(b.N), "rows-deleted")
	b.ReportMetric(float64(deleted)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/purge")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// seedEveryMinute creates perCamera images a minute apart from first for
// each of cameras cameras, in batches, benchSeeders at a time.
func (s *benchStore) seedEveryMinute(b *testing.B, cameras int, first time.Time, perCamera int) {
	b.Helper()
	var next atomic.Int64
	g, ctx := errgroup.WithContext(b.Context())
	for range benchSeeders {
		g.Go(func() error {
			const batch = 500
			imgs := make([]images.Image, 0, batch)
			for i := next.Add(batch) - batch; i < int64(cameras*perCamera); i = next.Add(batch) - batch {
				imgs = imgs[:0]
				for j := i; j < min(i+batch, int64(cameras*perCamera)); j++ {
					imgs = append(imgs, upload(expiredCamera(int(j)/perCamera), first.Add(time.Duration(int(j)%perCamera)*time.Minute)))
				}
				for _, r := range s.repo.BatchCreate(ctx, imgs) {
					if r.Err != nil {
						return r.Err
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("seeding: %v", err)
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
