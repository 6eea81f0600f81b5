package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metadatad/metadatad/store/blobs"
)

var (
	streamsOpen = prometheus.NewDesc("metadatad_streams_open",
		"Streams open now, by what their caps count: watch_purge (-max-watches), image_feed (-max-feeds), watch_deleted_images (-max-deleted-image-watches).",
		[]string{"stream"}, nil)
	blobsDeleted = prometheus.NewDesc("metadatad_blob_deleter_blobs_total",
		"Blobs of deleted images the blob deleter handled: deleted (or already gone), or outside (under no allowed container, left alone).",
		[]string{"outcome"}, nil)
	blobsFailed = prometheus.NewDesc("metadatad_blob_deleter_failed_steps_total",
		"Steps of the blob deleter that failed (a blob delete or a position write); the next step retries.", nil, nil)
	blobsLag = prometheus.NewDesc("metadatad_blob_deleter_lag_seconds",
		"How long ago the oldest record of the outbox the blob deleter has still to handle was deleted; 0 when it has caught up.", nil, nil)
	freeSpaceLow = prometheus.NewDesc("metadatad_free_space_low",
		"1 while the data directory's free space was below -min-free-mib at its last reading and writes are refused, else 0.", nil, nil)
)

// WatchStreams exposes metadatad_streams_open: open returns the count of
// each stream label (watch_purge, image_feed, watch_deleted_images).
func (m *Metrics) WatchStreams(open func() map[string]int64) {
	m.Registry.MustRegister(collectorFunc{desc: streamsOpen, collect: func(ch chan<- prometheus.Metric) {
		for stream, n := range open() {
			ch <- prometheus.MustNewConstMetric(streamsOpen, prometheus.GaugeValue, float64(n), stream)
		}
	}})
}

// WatchBlobDeleter exposes the blob deleter's series; now is the clock of
// its lag.
func (m *Metrics) WatchBlobDeleter(d interface{ Stats() blobs.Stats }, now func() time.Time) {
	m.Registry.MustRegister(multiCollector{descs: []*prometheus.Desc{blobsDeleted, blobsFailed, blobsLag}, collect: func(ch chan<- prometheus.Metric) {
		s := d.Stats()
		ch <- prometheus.MustNewConstMetric(blobsDeleted, prometheus.CounterValue, float64(s.Deleted), "deleted")
		ch <- prometheus.MustNewConstMetric(blobsDeleted, prometheus.CounterValue, float64(s.Outside), "outside")
		ch <- prometheus.MustNewConstMetric(blobsFailed, prometheus.CounterValue, float64(s.Failed))
		lag := 0.0
		if !s.Behind.IsZero() {
			lag = max(0, now().Sub(s.Behind).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(blobsLag, prometheus.GaugeValue, lag)
	}})
}

// WatchFreeSpace exposes metadatad_free_space_low from the free-space
// guard's last reading.
func (m *Metrics) WatchFreeSpace(low func() bool) {
	m.Registry.MustRegister(collectorFunc{desc: freeSpaceLow, collect: func(ch chan<- prometheus.Metric) {
		v := 0.0
		if low() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(freeSpaceLow, prometheus.GaugeValue, v)
	}})
}

// multiCollector is a collector of several series computed at scrape time.
type multiCollector struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c multiCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}
func (c multiCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
