package retention_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// BenchmarkBudget loads one image a minute of 100 cameras over 7 days
// (1,008,000 images), settled, then sets a storage budget of half the live
// data and steps it until the store rests under it: the time that takes
// (measures, the purges of the oldest hours, their settling) and the rows
// it purged per second. estimate/compacted compares the live data the
// budget measured at rest with what it is once the store is compacted
// (when no deletion is left to estimate): how far the engine's accounting
// is from the truth it stands for.
func BenchmarkBudget(b *testing.B) {
	const cameras, days = 100, 7
	var purged int64
	var estimate, compacted float64
	for range b.N {
		b.StopTimer()
		s := openBenchStore(b, nil)
		first := time.Now().UTC().Truncate(time.Hour).Add(-policy.Days(days))
		s.seedEveryMinute(b, cameras, first, int(policy.Days(days)/time.Minute))
		if err := s.db.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
		s.run(b)
		var full uint64
		for ok := false; !ok; full, ok = s.db.LiveBytes() {
			time.Sleep(10 * time.Millisecond)
		}
		budget := embedded.Budget{MaxBytes: full / 2, Floor: time.Hour, Store: s.db}
		budgeter := embedded.NewBudgeter(s.engine, []*images.Repository{s.repo}, slog.New(slog.DiscardHandler))
		b.StartTimer()
		var st embedded.BudgetState
		for {
			var err error
			if st, err = budgeter.Once(b.Context(), budget); err != nil {
				b.Fatal(err)
			}
			if st.Job == "" && !st.Measured.IsZero() && !st.Over {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		jobs, _, err := s.engine.List(b.Context(), 1000, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range jobs {
			purged += j.Totals().MetadataRows
		}
		if err := s.db.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
		actual, _ := s.db.LiveBytes() // compacted: no deletion left to estimate
		b.Logf("live data %d, budget %d; at rest the budget measured %d, and once compacted it is %d", full, budget.MaxBytes, st.LiveBytes, actual)
		estimate += float64(st.LiveBytes)
		compacted += float64(actual)
		s.close()
	}
	b.ReportMetric(float64(purged)/float64(b.N), "rows-purged")
	b.ReportMetric(float64(purged)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(estimate/compacted, "estimate/compacted")
}
