package telemetry

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/metadatad/metadatad/store/observed"
)

// Metrics is the registry /metrics serves and the series the server and
// the store record into.
type Metrics struct {
	// Registry holds every series.
	Registry *prometheus.Registry
	// GRPC counts calls by service, method and code, with handling-time
	// histograms; the server puts its interceptors in its chain.
	GRPC *grpcprom.ServerMetrics
	// Store is for observed.Backend.
	Store *observed.Metrics
}

// NewMetrics creates the registry with the gRPC, store, Go runtime and
// process series.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		GRPC: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0001, 4, 10)))),
		Store: observed.NewMetrics(reg),
	}
	reg.MustRegister(m.GRPC, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// WatchCertificate exposes the expiry of the certificate current returns,
// read at every scrape so a rotated certificate shows at once, as
// metadatad_tls_certificate_expiry_timestamp_seconds{name}. current returns
// nil while there is none.
func (m *Metrics) WatchCertificate(name string, current func() *x509.Certificate) {
	desc := prometheus.NewDesc("metadatad_tls_certificate_expiry_timestamp_seconds",
		"NotAfter of the certificate in use, in Unix seconds.", nil, prometheus.Labels{"name": name})
	m.Registry.MustRegister(collectorFunc{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		if c := current(); c != nil {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(c.NotAfter.Unix()))
		}
	}})
}

// SetBuildInfo exposes metadatad_build_info{version,revision,goversion},
// always 1, so that dashboards can tell which build each replica runs.
func (m *Metrics) SetBuildInfo(version, revision, goVersion string) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "metadatad_build_info",
		Help:        "Always 1; its labels are the module version, VCS revision and Go version of the binary.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	}, func() float64 { return 1 }))
}

// collectorFunc is a collector of one series computed at scrape time.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// Serve serves /metrics on lis until ctx ends. A series that fails to
// collect is logged and left out; the others are still served.
func (m *Metrics) Serve(ctx context.Context, lis net.Listener, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
