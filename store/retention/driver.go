package retention

import (
	"context"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// A driver is one backend's purge design. The engine keeps what both
// designs share (jobs and their store, leases, cancels, the schedule,
// retirement, pacing, statistics, policies and holds) and asks its driver
// for the rest: the embedded store's sections (embedded.go), or the queue
// design (queue.go) on a backend with neither range deletions nor atomic
// batches across partitions (Azure). The engine picks the driver from the
// backend: a store.Purger gets the embedded one.
type driver interface {
	// name is recorded on every job the engine starts (Job.Driver). A job
	// recorded under another name, by an earlier release or by the other
	// design, is not resumed but ends failed, to be started again: its
	// progress means nothing to this driver (see ErrForeignJob).
	name() string
	// serve starts on wg what the design runs beside its jobs while Run
	// runs, until ctx ends: the queue design's workers.
	serve(ctx context.Context, wg *sync.WaitGroup)
	// beginJob readies a job's run under its lease, before its first
	// kind: the queue design guards its tasks' writes with the lease.
	beginJob(ctx context.Context, held lease) error
	// purgeKind takes one kind of a job from wherever a previous run left
	// it to its end, with what it deletes counted in the job's record by
	// then, whatever the ending. It returns ErrCancelled once the job is
	// cancelled.
	purgeKind(ctx context.Context, id string, kind images.Kind) error
	// settleCancelled brings a cancelled job's kind's counts to all that
	// its deletes took, before the job ends Cancelled.
	settleCancelled(ctx context.Context, id string, kind images.Kind) error

	// The outbox of deleted images (Options.Outbox): each design records
	// every image it deletes exactly once, in its own way, and the engine
	// reads them back through these.

	// jobKeepsOutbox says whether a new job keeps an outbox of its own
	// (Job.Outbox), which the engine opens at its start and seals at its
	// end.
	jobKeepsOutbox(dryRun bool) bool
	// sealJobOutbox closes an ending job's outbox for the readers; a
	// failure leaves the job running, to be ended again.
	sealJobOutbox(ctx context.Context, id string) error
	// deletedImages reads the outbox after a resume token.
	deletedImages(ctx context.Context, after string, limit int) ([]DeletedImage, error)
	// checkResumeToken reports whether tok could be one of this outbox's
	// tokens: ErrBadResumeToken if not.
	checkResumeToken(tok string) error
	// retireOutbox deletes the records of deletions before cutoff.
	retireOutbox(ctx context.Context, cutoff time.Time) (int, error)
	// markOutboxRestored records that a restore took the store back to a
	// backup (see Engine.MarkOutboxRestored).
	markOutboxRestored(ctx context.Context) error
}
