package telemetry

import "github.com/prometheus/client_golang/prometheus"

// WatchSilentCameras exposes the count of silent cameras per image type
// as metadatad_silent_cameras{image_type}. counts returns the last counts
// a background loop made (store/fleet.Silence), so a scrape reads no
// store; an image type not counted yet has no series.
func (m *Metrics) WatchSilentCameras(counts func() map[string]int) {
	m.Registry.MustRegister(silentCollector(counts))
}

var silentCameras = prometheus.NewDesc("metadatad_silent_cameras",
	"Cameras whose latest image is older than -fleet-silent-after but within -fleet-look-back, per image type, as last counted.",
	[]string{"image_type"}, nil)

type silentCollector func() map[string]int

func (c silentCollector) Describe(ch chan<- *prometheus.Desc) { ch <- silentCameras }

func (c silentCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, n := range c() {
		ch <- prometheus.MustNewConstMetric(silentCameras, prometheus.GaugeValue, float64(n), kind)
	}
}
