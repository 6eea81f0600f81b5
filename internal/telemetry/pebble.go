package telemetry

import (
	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// PebbleMetrics is the embedded store's account of its own health;
// *pebble.DB has it.
type PebbleMetrics interface {
	Metrics() *pebbledb.Metrics
}

// WatchPebble exposes the embedded store's health, read at every scrape.
func (m *Metrics) WatchPebble(db PebbleMetrics) {
	m.Registry.MustRegister(pebbleCollector{db: db})
}

var (
	pebbleReadAmp = prometheus.NewDesc("metadatad_pebble_read_amplification",
		"Sorted runs a read may visit (L0 sublevels plus non-empty levels); high while compactions lag.", nil, nil)
	pebbleCompactionDebt = prometheus.NewDesc("metadatad_pebble_compaction_debt_bytes",
		"Estimated bytes compactions must rewrite to bring the LSM back into shape.", nil, nil)
	pebbleCacheHits = prometheus.NewDesc("metadatad_pebble_block_cache_hits_total",
		"Block cache hits; the hit rate is rate(hits) / (rate(hits) + rate(misses)).", nil, nil)
	pebbleCacheMisses = prometheus.NewDesc("metadatad_pebble_block_cache_misses_total",
		"Block cache misses.", nil, nil)
	pebbleCacheBytes = prometheus.NewDesc("metadatad_pebble_block_cache_size_bytes",
		"Bytes held by the block cache.", nil, nil)
	pebbleDisk = prometheus.NewDesc("metadatad_pebble_disk_usage_bytes",
		"Bytes the store takes on disk: tables, WAL, manifests and obsolete files not yet deleted.", nil, nil)
)

type pebbleCollector struct{ db PebbleMetrics }

func (c pebbleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pebbleReadAmp, pebbleCompactionDebt, pebbleCacheHits, pebbleCacheMisses, pebbleCacheBytes, pebbleDisk} {
		ch <- d
	}
}

func (c pebbleCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.db.Metrics()
	ch <- prometheus.MustNewConstMetric(pebbleReadAmp, prometheus.GaugeValue, float64(m.ReadAmp()))
	ch <- prometheus.MustNewConstMetric(pebbleCompactionDebt, prometheus.GaugeValue, float64(m.Compact.EstimatedDebt))
	ch <- prometheus.MustNewConstMetric(pebbleCacheHits, prometheus.CounterValue, float64(m.BlockCache.Hits))
	ch <- prometheus.MustNewConstMetric(pebbleCacheMisses, prometheus.CounterValue, float64(m.BlockCache.Misses))
	ch <- prometheus.MustNewConstMetric(pebbleCacheBytes, prometheus.GaugeValue, float64(m.BlockCache.Size))
	ch <- prometheus.MustNewConstMetric(pebbleDisk, prometheus.GaugeValue, float64(m.DiskSpaceUsage()))
}
