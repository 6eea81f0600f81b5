package retention_test

import (
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// BenchmarkPurgeWithAHold purges BenchmarkPurgeAgainstPostgres's 200,000
// expired rows over 4,000 cameras, settled, beside a camera on legal hold
// whose one image is older than all of them, and without it. A held
// camera's rows keep their index rows, so the index's range deletion stops
// at its oldest and the purged rows after it lose their index rows by
// derived key: rows/s with the hold against without is the cost of a
// hold that outlives the retention.
func BenchmarkPurgeWithAHold(b *testing.B) {
	l := benchLayout{expired: 200_000, cameras: 4_000}
	for _, held := range []bool{false, true} {
		b.Run(map[bool]string{false: "no-hold", true: "old-hold"}[held], func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s := openBenchStore(b, nil)
				now := time.Now().UTC()
				s.seed(b, l, now)
				if held {
					if _, err := s.repo.Create(b.Context(), upload("held-0", now.Add(-benchAge-time.Hour))); err != nil {
						b.Fatal(err)
					}
					if _, err := s.engine.Policies().CreateHold(b.Context(), policy.Hold{CameraID: "held-0"}); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.db.Compact(b.Context()); err != nil {
					b.Fatal(err)
				}
				s.run(b)
				b.StartTimer()
				j := s.await(b, s.start(b, now, 0).ID)
				b.StopTimer()
				if c := j.Totals(); j.State != retention.Succeeded || c.MetadataRows != int64(l.expired) || c.IndexRows != int64(l.expired) {
					b.Fatalf("purge %s (%s): %+v, want %d rows of each table", j.State, j.Error, c, l.expired)
				}
				s.close()
			}
			b.ReportMetric(float64(b.N)*float64(l.expired)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
