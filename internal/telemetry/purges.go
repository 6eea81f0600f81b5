package telemetry

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// Purges is what the purge series read; *retention.Engine has it.
type Purges interface {
	Stats() retention.Stats
	Status(ctx context.Context) (retention.Status, error)
	Now() time.Time
	Kinds() []images.Kind
}

// QueueDepth is a queue that tells how many messages it holds; both
// purge queues have it.
type QueueDepth interface {
	Depth(ctx context.Context) (int64, error)
}

// PurgeOptions configures WatchPurges.
type PurgeOptions struct {
	// Queue is the purge task queue; nil leaves its depth out.
	Queue QueueDepth
	// Retention is the one retention the built-in schedule applies; 0 (and
	// so when it purges by policy) takes the latest purge's (as a CronJob
	// started it) for the oldest-row gauge.
	Retention time.Duration
	// Started is when this process started: with no purge in the store,
	// the time since a success counts from it. Default: at WatchPurges.
	Started time.Time
	// Timeout bounds the store reads of one scrape; default 5 seconds.
	Timeout time.Duration
	// Logger gets the failures of those reads; nil means slog.Default.
	Logger *slog.Logger
}

// WatchPurges exposes the purge series. The store-wide ones (last success,
// oldest row past its cutoff, queue depth) are read at each scrape, the
// same from every replica; the counts are this process's.
func (m *Metrics) WatchPurges(p Purges, opts PurgeOptions) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Started.IsZero() {
		opts.Started = p.Now()
	}
	m.Registry.MustRegister(&purgeCollector{purges: p, opts: opts})
}

var (
	purgeRunning = prometheus.NewDesc("metadatad_purge_jobs_running",
		"Purge jobs this process is running.", nil, nil)
	purgeEnded = prometheus.NewDesc("metadatad_purge_jobs_ended_total",
		"Purge jobs this process ended, by final state (succeeded, failed, cancelled), dry runs included.", []string{"state"}, nil)
	purgeRows = prometheus.NewDesc("metadatad_purge_rows_deleted_total",
		"Rows the purges this process runs deleted, by table; counted as each section or task of a purge is recorded.", []string{"table"}, nil)
	purgeDevicesFailed = prometheus.NewDesc("metadatad_purge_devices_failed_total",
		"Cameras the purges this process ended could not purge; the next purge retries them.", nil, nil)
	purgeQueueDepth = prometheus.NewDesc("metadatad_purge_queue_depth",
		"Purge tasks in the queue, those being worked on included.", nil, nil)
	purgeLastSuccess = prometheus.NewDesc("metadatad_purge_last_success_timestamp_seconds",
		"When the latest successful purge (not a dry run) of the image type ended, in Unix seconds.", []string{"kind"}, nil)
	purgeSinceSuccess = prometheus.NewDesc("metadatad_purge_since_success_seconds",
		"Seconds since the latest successful purge (not a dry run) of the image type ended; with none in the store, since the oldest purge there was started, or with no purge at all since this process started. Alert on this.",
		[]string{"kind"}, nil)
	purgeRetention = prometheus.NewDesc("metadatad_purge_retention_seconds",
		"The one retention the oldest-row gauge judges against: the schedule's, else the latest purge's; missing when purges go by policy or a camera is on hold.", nil, nil)
	purgeOverdue = prometheus.NewDesc("metadatad_purge_oldest_row_past_cutoff_seconds",
		"How long past its cutoff (now minus the one retention) the oldest row of the image type is; 0 when none is past it; missing when purges go by policy or a camera is on hold, whose rules keep rows past it.",
		[]string{"kind"}, nil)
	purgeStatusUp = prometheus.NewDesc("metadatad_purge_status_up",
		"1 when this scrape could read the purge status from the store, else 0 and the store-wide purge series are missing.", nil, nil)
)

type purgeCollector struct {
	purges Purges
	opts   PurgeOptions
}

func (c *purgeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{purgeRunning, purgeEnded, purgeRows, purgeDevicesFailed,
		purgeQueueDepth, purgeLastSuccess, purgeSinceSuccess, purgeRetention, purgeOverdue, purgeStatusUp} {
		ch <- d
	}
}

func (c *purgeCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.purges.Stats()
	ch <- prometheus.MustNewConstMetric(purgeRunning, prometheus.GaugeValue, float64(stats.Running))
	// Every final state, each from 0: a rate over a series that appears
	// only at its first job would miss that job.
	for _, state := range []retention.State{retention.Succeeded, retention.Failed, retention.Cancelled} {
		ch <- prometheus.MustNewConstMetric(purgeEnded, prometheus.CounterValue, float64(stats.Ended[state]), string(state))
	}
	for table, n := range stats.RowsDeleted {
		ch <- prometheus.MustNewConstMetric(purgeRows, prometheus.CounterValue, float64(n), table)
	}
	ch <- prometheus.MustNewConstMetric(purgeDevicesFailed, prometheus.CounterValue, float64(stats.DevicesFailed))

	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	if c.opts.Queue != nil {
		if n, err := c.opts.Queue.Depth(ctx); err != nil {
			c.opts.Logger.Warn("metrics: reading the purge queue depth failed", "err", err)
		} else {
			ch <- prometheus.MustNewConstMetric(purgeQueueDepth, prometheus.GaugeValue, float64(n))
		}
	}
	status, err := c.purges.Status(ctx)
	if err != nil {
		c.opts.Logger.Warn("metrics: reading the purge status failed", "err", err)
		ch <- prometheus.MustNewConstMetric(purgeStatusUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(purgeStatusUp, prometheus.GaugeValue, 1)
	c.collectStatus(ch, status)
}

// collectStatus exports the store-wide series of one status read.
func (c *purgeCollector) collectStatus(ch chan<- prometheus.Metric, status retention.Status) {
	now := c.purges.Now()
	for kind, at := range status.LastSucceeded {
		ch <- prometheus.MustNewConstMetric(purgeLastSuccess, prometheus.GaugeValue, float64(at.Unix()), kind.String())
	}
	// Every kind from the start, so that purges that never start (a
	// CronJob with a bad token) are seen as well as purges that fail.
	since := c.opts.Started
	if !status.FirstPurge.IsZero() {
		since = status.FirstPurge
	}
	for _, kind := range c.purges.Kinds() {
		from := since
		if at, ok := status.LastSucceeded[kind]; ok {
			from = at
		}
		ch <- prometheus.MustNewConstMetric(purgeSinceSuccess, prometheus.GaugeValue, max(0, now.Sub(from).Seconds()), kind.String())
	}
	keep := c.opts.Retention
	if keep == 0 {
		keep = status.Retention
	}
	if keep == 0 || status.Held {
		return // no one retention that every row is judged by
	}
	ch <- prometheus.MustNewConstMetric(purgeRetention, prometheus.GaugeValue, keep.Seconds())
	cutoff := now.Add(-keep).Truncate(time.Minute)
	for _, kind := range c.purges.Kinds() {
		overdue := 0.0
		if oldest, ok := status.Oldest[kind]; ok {
			overdue = max(0, cutoff.Sub(oldest).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(purgeOverdue, prometheus.GaugeValue, overdue, kind.String())
	}
}
