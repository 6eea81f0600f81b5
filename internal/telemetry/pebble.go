package telemetry

import (
	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metadatad/metadatad/store"
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

// TallyProgress is the embedded store's account of a table's tally
// backfill; *pebble.DB has it.
type TallyProgress interface {
	TallyProgress(table string) (rows int64, complete bool, err error)
}

// WatchTallies exposes the backfill of each table's tally (see
// store.Purger): a store written before tallies gains them at its first
// start, and its first purge waits for them.
func (m *Metrics) WatchTallies(db TallyProgress, tables []store.Table) {
	m.Registry.MustRegister(tallyCollector{db: db, tables: tables})
}

var (
	tallyBackfillRows = prometheus.NewDesc("metadatad_tally_backfill_rows_total",
		"Rows the backfill of a table's tally has counted since the process started.", []string{"table"}, nil)
	tallyComplete = prometheus.NewDesc("metadatad_tally_complete",
		"1 once a table's tally counts every row (purges wait for it), else 0.", []string{"table"}, nil)
)

type tallyCollector struct {
	db     TallyProgress
	tables []store.Table
}

func (c tallyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tallyBackfillRows
	ch <- tallyComplete
}

func (c tallyCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.tables {
		rows, complete, err := c.db.TallyProgress(t.Name())
		if err != nil {
			continue // not tallied (yet): nothing to say
		}
		done := 0.0
		if complete {
			done = 1
		}
		ch <- prometheus.MustNewConstMetric(tallyBackfillRows, prometheus.CounterValue, float64(rows), t.Name())
		ch <- prometheus.MustNewConstMetric(tallyComplete, prometheus.GaugeValue, done, t.Name())
	}
}
