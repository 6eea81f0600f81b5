package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// planRule resolves a camera met first at its oldest index row (see resolve).
func planRule(ctx context.Context, r *retention.Rules, camera string, oldest images.IndexRow) (policy.CameraRule, error) {
	minute, err := time.Parse("200601021504", oldest.PartitionKey[:min(len(oldest.PartitionKey), 12)])
	if err != nil {
		return policy.CameraRule{}, fmt.Errorf("retention: index partition %q: %w", oldest.PartitionKey, err)
	}
	return r.Resolve(ctx, camera, minute)
}

// expiredFor reports whether an index row lies before a camera's boundary.
func expiredFor(row images.IndexRow, boundary time.Time) bool {
	return row.PartitionKey < store.MinutePartitionKey(boundary)
}

// The boundary each camera of a purge with policies got is recorded in
// the job's task partition, one row per camera, so that the janitor reads
// the primary rows of index rows only where the work deleted primary rows,
// whatever the policies became since: a kept camera's rows cost it nothing.
const propBoundary = "Boundary"

func boundaryRowKey(kind images.Kind, camera string) string {
	return "b_" + kind.String() + "_" + camera
}

// recordBoundaries writes the boundaries of a task's cameras, before the
// task itself: a task recorded has its cameras' boundaries recorded. A
// camera with none (held when planned) is left out: the janitor reads it
// as not planned, which it is not, for deletes. Each batch keeps a place
// for the lease's guard (see ownedBatch).
func (s *taskStore) recordBoundaries(ctx context.Context, t *task) error {
	const perBatch = store.MaxBatchOps - 1
	devices := slices.DeleteFunc(slices.Clone(t.Devices), func(d *taskDevice) bool { return d.janitorBound().IsZero() })
	for start := 0; start < len(devices); start += perBatch {
		end := min(start+perBatch, len(devices))
		ops := make([]store.Op, 0, end-start)
		for _, d := range devices[start:end] {
			ops = append(ops, store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{
				PartitionKey: t.JobID, RowKey: boundaryRowKey(t.Kind, d.ID),
				Properties: store.Properties{propBoundary: d.janitorBound()}}})
		}
		if err := s.ownedBatch(ctx, t.JobID, ops); err != nil {
			return err
		}
	}
	return nil
}

// boundaryOf reads the boundary a camera got; zero if it was not planned.
func (s *taskStore) boundaryOf(ctx context.Context, jobID string, kind images.Kind, camera string) (time.Time, error) {
	e, err := s.table.Get(ctx, jobID, boundaryRowKey(kind, camera))
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	b, _ := e.Properties[propBoundary].(time.Time)
	return b, nil
}

// cameraBounds maps camera ids to boundaries within a byte limit, counted
// as cameraBytes does.
type cameraBounds struct {
	of    map[string]time.Time
	bytes int
	limit int
}

func newCameraBounds(limit int) *cameraBounds {
	return &cameraBounds{of: map[string]time.Time{}, limit: limit}
}

func (c *cameraBounds) put(id string, b time.Time) {
	if _, ok := c.of[id]; !ok {
		c.bytes += cameraBytes(id) + 24
	}
	c.of[id] = b
}

func (c *cameraBounds) full() bool { return c.bytes > c.limit }

// boundaryCache is the janitor's memory of the cameras' recorded boundaries:
// at most Options.CameraMemory, forgotten whole when full, since a scan
// meets the cameras of one minute after another.
type boundaryCache struct {
	tasks *taskStore
	job   string
	kind  images.Kind
	known *cameraBounds
}

func (c *boundaryCache) boundary(ctx context.Context, camera string) (time.Time, error) {
	if b, ok := c.known.of[camera]; ok {
		return b, nil
	}
	b, err := c.tasks.boundaryOf(ctx, c.job, c.kind, camera)
	if err != nil {
		return time.Time{}, err
	}
	if c.known.full() {
		c.known = newCameraBounds(c.known.limit)
	}
	c.known.put(camera, b)
	return b, nil
}
