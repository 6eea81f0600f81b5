package telemetry

import "github.com/prometheus/client_golang/prometheus"

// AzureClock is the Azure backend's account of the writes it could not
// time by the service's ETag; *aztable.Backend has it.
type AzureClock interface {
	ClockFallbacks() (date, local uint64)
}

// WatchAzureClock exposes the Azure backend's clock fallbacks, read at
// every scrape, as metadatad_azure_clock_fallback_total{source}: a write's
// Timestamp taken from the answer's Date header (to the second) or from
// this process's clock, where retention's sweep safety wants the
// service's exact time. Alert on any increase.
func (m *Metrics) WatchAzureClock(c AzureClock) {
	m.Registry.MustRegister(collectorFunc{desc: azureClockFallback, collect: func(ch chan<- prometheus.Metric) {
		date, local := c.ClockFallbacks()
		ch <- prometheus.MustNewConstMetric(azureClockFallback, prometheus.CounterValue, float64(date), "date")
		ch <- prometheus.MustNewConstMetric(azureClockFallback, prometheus.CounterValue, float64(local), "local")
	}})
}

var azureClockFallback = prometheus.NewDesc("metadatad_azure_clock_fallback_total",
	"Azure writes whose Timestamp did not come from the service's ETag, by the source that stood in: "+
		"the answer's Date header (date, to the second) or this process's clock (local).", []string{"source"}, nil)
