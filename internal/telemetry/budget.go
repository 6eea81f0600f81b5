package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metadatad/metadatad/store/retention/embedded"
)

// Budget is what the storage budget's series read; *embedded.Budgeter has it.
type Budget interface {
	BudgetState() embedded.BudgetState
}

var (
	budgetMax = prometheus.NewDesc("metadatad_retention_budget_bytes",
		"The storage budget (-retention-max-bytes): the most live data the embedded store may hold.", nil, nil)
	budgetLive = prometheus.NewDesc("metadatad_store_live_bytes",
		"The embedded store's live data as the budget last measured it: stored bytes less what deletions will reclaim.", nil, nil)
	budgetOver = prometheus.NewDesc("metadatad_retention_over_budget",
		"1 while the live data is over the budget (the budget purges the oldest images), else 0.", nil, nil)
	budgetBlocked = prometheus.NewDesc("metadatad_retention_budget_blocked",
		"1 while the store is over budget and only images that are held (reason=\"held\") or younger than the floor (reason=\"floor\") are left to purge.",
		[]string{"reason"}, nil)
)

// WatchBudget exposes the storage budget's series, from what it last
// found (no store read at scrape time).
func (m *Metrics) WatchBudget(b Budget) {
	m.Registry.MustRegister(&budgetCollector{b})
}

type budgetCollector struct{ b Budget }

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{budgetMax, budgetLive, budgetOver, budgetBlocked} {
		ch <- d
	}
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.BudgetState()
	if st.MaxBytes == 0 {
		return // no step has run yet
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(budgetMax, prometheus.GaugeValue, float64(st.MaxBytes))
	if !st.Measured.IsZero() {
		ch <- prometheus.MustNewConstMetric(budgetLive, prometheus.GaugeValue, float64(st.LiveBytes))
	}
	ch <- prometheus.MustNewConstMetric(budgetOver, prometheus.GaugeValue, flag(st.Over))
	for _, reason := range []string{"held", "floor"} {
		ch <- prometheus.MustNewConstMetric(budgetBlocked, prometheus.GaugeValue, flag(st.Blocked == reason), reason)
	}
}
