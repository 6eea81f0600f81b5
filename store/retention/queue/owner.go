package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
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

// ownerRowPrefix starts the rows of the owners' epochs in a job's task
// partition; no task or boundary row starts so (see taskRowKey and
// boundaryRowKey).
const ownerRowPrefix = "owner_"

const propEpoch = "Epoch"

// ownerRowKey sorts the epochs in order.
func ownerRowKey(epoch int64) string { return fmt.Sprintf("%s%020d", ownerRowPrefix, epoch) }

// takeTasks makes l's epoch the one whose task writes the job's task
// partition accepts: its row goes in, the older epochs' go. retention.ErrLeaseLost
// if a newer epoch is there already.
func (s *taskStore) takeTasks(ctx context.Context, l retention.Lease) error {
	mine := ownerRowKey(l.Epoch)
	if _, err := s.table.Upsert(ctx, store.Entity{PartitionKey: l.Job, RowKey: mine,
		Properties: store.Properties{propEpoch: l.Epoch}}, store.Replace); err != nil {
		return err
	}
	q := store.Query{PartitionKey: l.Job, Rows: store.Range{From: ownerRowPrefix, To: ownerRowPrefix[:len(ownerRowPrefix)-1] + "`"}}
	for {
		page, err := s.table.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			switch {
			case e.RowKey > mine:
				epoch, _ := strconv.ParseInt(strings.TrimPrefix(e.RowKey, ownerRowPrefix), 10, 64)
				return fmt.Errorf("%w: job %s is at epoch %d, past %d", retention.ErrLeaseLost, l.Job, epoch, l.Epoch)
			case e.RowKey < mine:
				if err := s.table.Delete(ctx, l.Job, e.RowKey, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
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
	l, ok := retention.HeldLease(ctx, job)
	if !ok {
		return fmt.Errorf("retention: a write of the tasks of job %s without its lease", job)
	}
	guard := store.Op{Kind: store.OpUpdate, Mode: store.Merge, Entity: store.Entity{PartitionKey: job,
		RowKey: ownerRowKey(l.Epoch), Properties: store.Properties{propEpoch: l.Epoch}}}
	err := s.table.Batch(ctx, append([]store.Op{guard}, ops...))
	var be *store.BatchError
	if !errors.As(err, &be) {
		return err
	}
	if be.Index == 0 {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: job %s has moved past epoch %d", retention.ErrLeaseLost, job, l.Epoch)
		}
		return err
	}
	return &store.BatchError{Index: be.Index - 1, Err: be.Err}
}
