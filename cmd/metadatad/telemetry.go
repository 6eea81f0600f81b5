package main

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/metadatad/metadatad/internal/telemetry"
	"github.com/metadatad/metadatad/store/instrument"
	"github.com/metadatad/metadatad/store/queue"
	"github.com/metadatad/metadatad/store/retention"
)

// instrumentStore wraps the store's tables so every operation is measured,
// and gives the embedded store the queue the engine would make itself, so
// that its depth can be read. It returns nil, changing nothing, when
// metrics are off.
func instrumentStore(ctx context.Context, cfg config, b *backend) (*telemetry.Metrics, error) {
	if cfg.metricsListen == "" {
		return nil, nil
	}
	m := telemetry.NewMetrics()
	b.tables = instrument.Backend(b.tables, instrument.Options{Name: cfg.store, Metrics: m.Store})
	if b.queue == nil {
		t, err := b.tables.Table(ctx, retention.DefaultQueueTable)
		if err != nil {
			return nil, err
		}
		b.queue = queue.Open(t, queue.Options{})
	}
	if b.embedded != nil {
		m.WatchPebble(b.embedded)
	}
	return m, nil
}

// serveMetrics starts /metrics with the purge series; it stops when ctx ends.
func serveMetrics(ctx context.Context, cfg config, m *telemetry.Metrics, b backend, engine *retention.Engine, log *slog.Logger) error {
	depth, _ := b.queue.(telemetry.QueueDepth)
	m.WatchPurges(engine, telemetry.PurgeOptions{
		Queue: depth, Retention: time.Duration(cfg.retentionDays) * 24 * time.Hour, Logger: log,
	})
	lis, err := net.Listen("tcp", cfg.metricsListen)
	if err != nil {
		return err
	}
	log.Info("serving metrics", "addr", lis.Addr().String())
	go func() {
		if err := m.Serve(ctx, lis, log); err != nil {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	return nil
}
