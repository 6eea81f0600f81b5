package main

import (
	"context"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/metadatad/metadatad/internal/telemetry"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/blobs"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/observed"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// observability is what the daemon reports: metrics with -metrics-listen,
// traces when the OpenTelemetry variables name an endpoint; each nil when off.
type observability struct {
	metrics *telemetry.Metrics
	tracing trace.TracerProvider
	// stopTracing flushes the spans still buffered.
	stopTracing func(context.Context) error
}

// observe starts metrics and tracing as configured and wraps the store's
// tables so that every operation is measured and traced. With both off it
// changes nothing.
func observe(ctx context.Context, cfg config, b *backend) (observability, error) {
	var o observability
	if telemetry.TracingEnabled() {
		tp, stop, err := telemetry.StartTracing(ctx)
		if err != nil {
			return observability{}, err
		}
		o.tracing, o.stopTracing = tp, stop
	}
	if cfg.metricsListen != "" {
		o.metrics = telemetry.NewMetrics()
		build := readBuildInfo()
		o.metrics.SetBuildInfo(build.Version, build.Revision, build.GoVersion)
	}
	if o.metrics == nil && o.tracing == nil {
		return o, nil
	}
	opts := observed.Options{Name: cfg.store}
	if o.metrics != nil {
		opts.Metrics = o.metrics.Store
		if b.embedded != nil {
			o.metrics.WatchPebble(b.embedded)
		}
		if b.azure != nil {
			o.metrics.WatchAzureClock(b.azure)
		}
	}
	if o.tracing != nil {
		opts.Tracer = o.tracing.Tracer("github.com/metadatad/metadatad/store")
	}
	b.tables = observed.Backend(b.tables, opts)
	return o, nil
}

// shutdown flushes the traces, within the shutdown timeout.
func (o observability) shutdown(timeout time.Duration, log *slog.Logger) {
	if o.stopTracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := o.stopTracing(ctx); err != nil {
		log.Warn("flushing traces", "err", err)
	}
}

// served is what the daemon serves beside the store, for the metrics.
type served struct {
	srv *server.Server
	// deleter is the blob deleter; nil without one.
	deleter *blobs.Deleter
	// budgeter is the storage budget; nil without one.
	budgeter *embedded.Budgeter
}

// serveMetrics serves /metrics on lis with the purge, stream, blob deleter
// and free-space series; it stops when ctx ends.
func serveMetrics(ctx context.Context, cfg config, m *telemetry.Metrics, lis net.Listener, b backend, engine *retention.Engine,
	repos map[images.Kind]*images.Repository, on served, log *slog.Logger) {
	m.WatchStreams(func() map[string]int64 {
		open := on.srv.OpenStreams()
		return map[string]int64{"watch_purge": open.PurgeWatches, "image_feed": open.Feeds, "watch_deleted_images": open.DeletedImageWatches}
	})
	if on.deleter != nil {
		m.WatchBlobDeleter(on.deleter, time.Now)
	}
	if b.guard != nil {
		m.WatchFreeSpace(b.guard.Low)
	}
	depth, _ := b.queue.(telemetry.QueueDepth)
	// A schedule that purges by policy has no one retention to judge by.
	var retain time.Duration
	if !cfg.usePolicies {
		retain = time.Duration(cfg.retentionDays) * 24 * time.Hour
	}
	m.WatchPurges(engine, telemetry.PurgeOptions{Queue: depth, Retention: retain, Logger: log})
	if b.embedded != nil {
		var tallied []store.Table
		for _, kind := range images.Kinds {
			primary, _ := repos[kind].Tables()
			tallied = append(tallied, primary)
		}
		m.WatchTallies(b.embedded, tallied)
		if on.budgeter != nil {
			m.WatchBudget(on.budgeter)
		}
	}
	log.Info("serving metrics", "addr", lis.Addr().String())
	go func() {
		if err := m.Serve(ctx, lis, log); err != nil {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
}
