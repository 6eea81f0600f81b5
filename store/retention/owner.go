package retention

import (
	"context"
	"errors"
	"fmt"
)

// ErrLeaseLost stops an engine whose job another engine took over: it
// writes nothing more to the job or its tasks.
var ErrLeaseLost = errors.New("retention: the job's lease was taken over by another engine; this engine stops working on it")

// Lease is the lease an engine holds on a job: its own id and the job's
// LeaseEpoch when it took the job.
type Lease struct {
	Job, Owner string
	Epoch      int64
}

type leaseKey struct{}

// withLease marks ctx as the run of a job under l: every write of the job
// or its tasks made with it is refused once l is lost. Workers and
// requests (Cancel, Start) write without one.
func withLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// HeldLease is the lease ctx runs job under, if any: a driver guards its
// own writes of the job's state with it.
func HeldLease(ctx context.Context, job string) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok && l.Job == job
}

// Holds reports whether the stored job is still under l.
func (l Lease) Holds(j *Job) bool { return j.Owner == l.Owner && j.LeaseEpoch == l.Epoch }

// checkLease fails with ErrLeaseLost if ctx runs the job under a lease
// the stored job no longer has.
func checkLease(ctx context.Context, j *Job) error {
	if l, ok := HeldLease(ctx, j.ID); ok && !l.Holds(j) {
		return fmt.Errorf("%w: job %s is with %s (epoch %d), not %s (epoch %d)", ErrLeaseLost, j.ID, j.Owner, j.LeaseEpoch, l.Owner, l.Epoch)
	}
	return nil
}
