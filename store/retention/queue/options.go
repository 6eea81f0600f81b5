package queue

import (
	"context"
	"time"

	"github.com/metadatad/metadatad/store/tablequeue"
)

// Default tables of the queue design's own state.
const (
	DefaultTasksTable = "PurgeTasks"
	DefaultQueueTable = "PurgeQueue"
)

// Defaults of Options.
const (
	DefaultWorkers           = 4
	DefaultGroupSize         = 500
	DefaultVisibilityTimeout = 2 * time.Minute
	DefaultMaxAttempts       = 5
	DefaultCameraMemory      = 8 << 20
)

// Queue is the work queue the design fans tasks through: at-least-once,
// with a visibility timeout. *tablequeue.Queue implements it on a store
// table, *azqueue.Queue on Azure Queue Storage.
type Queue interface {
	Send(ctx context.Context, body []byte) error
	Receive(ctx context.Context, max int, visibility time.Duration) ([]tablequeue.Message, error)
	// Extend hides a received message for visibility from now and returns
	// it with its new receipt; tablequeue.ErrLostMessage if another receiver has it.
	Extend(ctx context.Context, m tablequeue.Message, visibility time.Duration) (tablequeue.Message, error)
	Delete(ctx context.Context, m tablequeue.Message) error
	DeadLetter(ctx context.Context, m tablequeue.Message) error
}

// Options tune the queue design. Zero fields take the defaults above.
type Options struct {
	// Queue carries tasks to workers; nil means a queue in the table
	// DefaultQueueTable of the engine's backend.
	Queue Queue
	// Workers is how many tasks run at once in this process.
	Workers int
	// GroupSize is how many cameras one task deletes. Each task costs a
	// few synced bookkeeping writes (its record twice, its queue message,
	// the job's totals), so larger groups keep a fleet of many cameras with
	// little expired data each from paying per camera.
	GroupSize int
	// VisibilityTimeout hides a task being worked on. A worker extends it
	// every third of it while the task runs, so only a worker that stopped
	// (crashed, or cut off from the queue) loses its task.
	VisibilityTimeout time.Duration
	// MaxAttempts is how many deliveries a task gets before its failing
	// cameras (their count, hold read or delete) are counted failed, or,
	// if its own record cannot be written, its job fails.
	MaxAttempts int
	// CameraMemory bounds the camera ids a purge holds at once, in bytes,
	// counted as cameraBytes does: planning splits the expired cameras into
	// as many buckets, one index scan each, as it takes for one bucket's to
	// fit. The default, 8 MiB, is about 100,000 cameras.
	CameraMemory int
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.GroupSize <= 0 {
		o.GroupSize = DefaultGroupSize
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.CameraMemory <= 0 {
		o.CameraMemory = DefaultCameraMemory
	}
	return o
}
