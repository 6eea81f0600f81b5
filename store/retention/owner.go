package retention

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/metadatad/metadatad/store"
)

// A job's lease passes from engine to engine by the clock: an engine that
// stalls past it (a pause, a partition from the store) may wake while
// another runs the job. Whatever it writes then is refused, so that two
// planners never interleave their tasks, which would leave cameras in no
// task (or in a task the other's bookkeeping does not count).
//
// Each acquisition of the lease bumps the job's LeaseEpoch. The owner's
// writes of the job row check, in the read-change-write that the ETag
// makes conditional, that the row still names it at its epoch. The tasks
// live in another table, so the job row cannot guard them in one batch:
// the owner keeps a row of its own epoch in the job's task partition
// (ownerRowKey), and each of its task writes is a batch that merges that
// row, so it fails, all of it, once the row is gone. A new owner writes
// its row and deletes those of older epochs before its first task write,
// and reads the tasks only after: every task an older owner wrote landed
// before, and the new owner sees it.

// ErrLeaseLost stops an engine whose job another engine took over: it
// writes nothing more to the job or its tasks.
var ErrLeaseLost = errors.New("retention: the job's lease was taken over by another engine; this engine stops working on it")

// lease is the lease an engine holds on a job.
type lease struct {
	job, owner string
	epoch      int64
}

type leaseKey struct{}

// withLease marks ctx as the run of a job under l: every write of the job
// or its tasks made with it is refused once l is lost. Workers and
// requests (Cancel, Start) write without one.
func withLease(ctx context.Context, l lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// heldLease is the lease ctx runs job under, if any.
func heldLease(ctx context.Context, job string) (lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(lease)
	return l, ok && l.job == job
}

// holds reports whether the stored job is still under l.
func (l lease) holds(j *Job) bool { return j.Owner == l.owner && j.LeaseEpoch == l.epoch }

// checkLease fails with ErrLeaseLost if ctx runs the job under a lease
// the stored job no longer has.
func checkLease(ctx context.Context, j *Job) error {
	if l, ok := heldLease(ctx, j.ID); ok && !l.holds(j) {
		return fmt.Errorf("%w: job %s is with %s (epoch %d), not %s (epoch %d)", ErrLeaseLost, j.ID, j.Owner, j.LeaseEpoch, l.owner, l.epoch)
	}
	return nil
}

// ownerRowPrefix starts the rows of the owners' epochs in a job's task
// partition; no task or boundary row starts so (see taskRowKey and
// boundaryRowKey).
const ownerRowPrefix = "owner_"

const propEpoch = "Epoch"

// ownerRowKey sorts the epochs in order.
func ownerRowKey(epoch int64) string { return fmt.Sprintf("%s%020d", ownerRowPrefix, epoch) }

// takeTasks makes l's epoch the one whose task writes the job's task
// partition accepts: its row goes in, the older epochs' go. ErrLeaseLost
// if a newer epoch is there already.
func (s *taskStore) takeTasks(ctx context.Context, l lease) error {
	mine := ownerRowKey(l.epoch)
	if _, err := s.table.Upsert(ctx, store.Entity{PartitionKey: l.job, RowKey: mine,
		Properties: store.Properties{propEpoch: l.epoch}}, store.Replace); err != nil {
		return err
	}
	q := store.Query{PartitionKey: l.job, Rows: store.Range{From: ownerRowPrefix, To: ownerRowPrefix[:len(ownerRowPrefix)-1] + "`"}}
	for {
		page, err := s.table.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			switch {
			case e.RowKey > mine:
				epoch, _ := strconv.ParseInt(strings.TrimPrefix(e.RowKey, ownerRowPrefix), 10, 64)
				return fmt.Errorf("%w: job %s is at epoch %d, past %d", ErrLeaseLost, l.job, epoch, l.epoch)
			case e.RowKey < mine:
				if err := s.table.Delete(ctx, l.job, e.RowKey, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
			}
		}
		if page.Next == nil {
			return nil
		}
		q.Resume = page.Next
	}
}

// ownedBatch applies ops to the job's task partition, all or none, only if
// ctx's lease still owns the job's tasks. The ops' errors come back as the
// batch reports them, indexed in ops.
func (s *taskStore) ownedBatch(ctx context.Context, job string, ops []store.Op) error {
	l, ok := heldLease(ctx, job)
	if !ok {
		return fmt.Errorf("retention: a write of the tasks of job %s without its lease", job)
	}
	guard := store.Op{Kind: store.OpUpdate, Mode: store.Merge, Entity: store.Entity{PartitionKey: job,
		RowKey: ownerRowKey(l.epoch), Properties: store.Properties{propEpoch: l.epoch}}}
	err := s.table.Batch(ctx, append([]store.Op{guard}, ops...))
	var be *store.BatchError
	if !errors.As(err, &be) {
		return err
	}
	if be.Index == 0 {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: job %s has moved past epoch %d", ErrLeaseLost, job, l.epoch)
		}
		return err
	}
	return &store.BatchError{Index: be.Index - 1, Err: be.Err}
}
