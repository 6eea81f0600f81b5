package retention

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// DefaultJobsTable is the table of the engine's jobs.
const DefaultJobsTable = "PurgeJobs"

// Options configures Open. Zero fields take the documented defaults.
type Options struct {
	// Backend holds the engine's jobs, and its driver's state. Required.
	Backend store.Backend
	// Repositories are the image repositories the engine purges, one per kind. Required.
	Repositories []*images.Repository
	// Driver makes the backend's purge design (see Driver). Required:
	// embedded.New for the embedded store, queue.New for Azure, with the
	// queue design's own options (drivers.For picks by backend).
	Driver NewDriver
	// Now is the clock for cutoffs and job times; nil means time.Now.
	Now func() time.Time
	// Logger gets job starts, ends and totals; nil means slog.Default.
	Logger *slog.Logger
	// PollInterval is how often idle workers and waiting jobs look for work
	// another process may have made; default 250 ms.
	PollInterval time.Duration
	// ReplicaID names this engine among the engines sharing the store;
	// default a random id.
	ReplicaID string
	// LeaseDuration is how long a job stays with the engine running it
	// without a renewal: after a crash, another engine takes it over this
	// long after the last renewal. Default 30 seconds.
	LeaseDuration time.Duration
	// TracerProvider traces jobs, their phases and tasks; nil means none.
	TracerProvider trace.TracerProvider
	// RowsPerSecond caps the rows this process's purges delete per second,
	// all jobs together, primary and index rows alike; 0 means no cap. A
	// job may set a lower cap of its own (StartRequest.RowsPerSecond).
	RowsPerSecond float64
	// LiveRowsPerSecond caps the rows this process's purges delete per
	// second while Live reports that requests are being served, so that a
	// purge yields to live traffic and runs at full speed on an idle store;
	// 0 means no such cap. It binds with RowsPerSecond and a job's own cap:
	// the lowest in force paces. Without Live it never binds. It is the
	// queue design's, whose cost follows rows: the embedded purge's follows
	// sections, so it paces by time instead (embedded.Options) and refuses
	// this cap.
	LiveRowsPerSecond float64
	// Live reports whether the process is serving requests now (the
	// server's record of its calls); asked before each step of a purge.
	Live func() bool
	// SectionCameras is how many cameras one exclusive batch of an
	// embedded purge deletes (see package embedded); creates wait for one such
	// batch at most. Default 10,000.
	SectionCameras int
	// JobRetention is how long the record of an ended job is kept: Run
	// retires older ones at its start and hourly (see RetireJobs). Default
	// DefaultJobRetention, 30 days. The outbox's rows are kept as long.
	JobRetention time.Duration
	// Outbox makes purges keep the outbox of the images they delete, for
	// the blob side: an embedded purge's sections then read the rows they
	// delete (outbox.go); on the queue design each delete batch writes its
	// outbox rows before and after it (outboxseal.go).
	Outbox bool
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	if o.ReplicaID == "" {
		var id [6]byte
		_, _ = rand.Read(id[:])
		o.ReplicaID = hex.EncodeToString(id[:])
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 30 * time.Second
	}
	if o.TracerProvider == nil {
		o.TracerProvider = noop.NewTracerProvider()
	}
	if o.SectionCameras <= 0 {
		o.SectionCameras = defaultSectionCameras
	}
	if o.JobRetention <= 0 {
		o.JobRetention = DefaultJobRetention
	}
	return o
}

// defaultSectionCameras is how many cameras one exclusive section purges by
// default: creates wait for a section, so it bounds their wait; a section
// of a thousand cameras takes a few milliseconds.
const defaultSectionCameras = 10_000
