package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// ErrNoPolicies reports a purge with policies while no policy sets a
// retention for any of its kinds.
var ErrNoPolicies = errors.New("retention: no retention policy is in force")

// shortest returns, per kind, the fewest days any policy keeps it: the
// newest cutoff in force, as far as a purge with policies scans the index.
// It reads the policies one page at a time.
func (p *Policies) shortest(ctx context.Context) (map[images.Kind]int, error) {
	out := map[images.Kind]int{}
	s := store.Scan{}
	for {
		page, err := p.policies.Scan(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			for k, d := range policyFromEntity(e).Days {
				if cur, ok := out[k]; d > 0 && (!ok || d < cur) {
					out[k] = d
				}
			}
		}
		if page.Next == nil {
			return out, nil
		}
		s.Resume = page.Next
	}
}

// resolver gives each camera its cutoff of one kind: the camera's own
// policy, else the longest prefix policy, else the default, the first that
// sets the kind's days. It holds the default and the prefix policies that
// set the kind (at most MaxPrefixPolicies) as they stood when it was made;
// each camera costs a read of its own policy as it stands when asked, and
// one of its hold if the policy expires its rows.
type resolver struct {
	p    *Policies
	kind images.Kind
	// now is the job's instant, from which days are counted.
	now      time.Time
	def      int
	prefixes map[string]int
	longest  int
}

func (p *Policies) resolver(ctx context.Context, kind images.Kind, now time.Time) (*resolver, error) {
	r := &resolver{p: p, kind: kind, now: now, prefixes: map[string]int{}}
	def, err := p.GetPolicy(ctx, ScopeDefault, "")
	switch {
	case err == nil:
		r.def = def.Days[kind]
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	q := store.Query{PartitionKey: string(ScopePrefix)}
	for {
		page, err := p.policies.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			if d := policyFromEntity(e).Days[kind]; d > 0 {
				if len(r.prefixes) >= MaxPrefixPolicies {
					return nil, fmt.Errorf("%w: more than %d", ErrTooManyPrefixes, MaxPrefixPolicies)
				}
				r.prefixes[e.RowKey] = d
				r.longest = max(r.longest, len(e.RowKey))
			}
		}
		if page.Next == nil {
			return r, nil
		}
		q.Resume = page.Next
	}
}

// plan resolves a camera met first at its oldest index row: the start of
// the minute of its own cutoff, and whether to purge it, which it is when
// that row is expired by it and the camera has no legal hold. A camera
// whose rows its policy keeps costs a read of its own policy alone; the
// hold is read only for one its policy would purge.
func (r *resolver) plan(ctx context.Context, camera string, oldest images.IndexRow) (b time.Time, purge bool, err error) {
	minute, err := time.Parse("200601021504", oldest.PartitionKey[:min(len(oldest.PartitionKey), 12)])
	if err != nil {
		return time.Time{}, false, fmt.Errorf("retention: index partition %q: %w", oldest.PartitionKey, err)
	}
	return r.resolve(ctx, camera, minute)
}

// resolve is plan for a camera whose oldest row lies in the minute that
// starts at oldest.
func (r *resolver) resolve(ctx context.Context, camera string, oldest time.Time) (b time.Time, purge bool, err error) {
	days := 0
	own, err := r.p.GetPolicy(ctx, ScopeCamera, camera)
	switch {
	case err == nil:
		days = own.Days[r.kind]
	case !errors.Is(err, store.ErrNotFound):
		return time.Time{}, false, err
	}
	for i := min(len(camera), r.longest); days == 0 && i > 0; i-- {
		days = r.prefixes[camera[:i]]
	}
	if days == 0 {
		days = r.def
	}
	if days == 0 {
		return time.Time{}, false, nil
	}
	b = r.now.Add(-Days(days)).UTC().Truncate(time.Minute)
	if !oldest.Before(b) {
		return b, false, nil
	}
	held, err := r.p.held(ctx, camera)
	return b, !held && err == nil, err
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
// task itself: a task recorded has its cameras' boundaries recorded. Each
// batch keeps a place for the lease's guard (see ownedBatch).
func (s *taskStore) recordBoundaries(ctx context.Context, t *task) error {
	const perBatch = store.MaxBatchOps - 1
	for start := 0; start < len(t.Devices); start += perBatch {
		end := min(start+perBatch, len(t.Devices))
		ops := make([]store.Op, 0, end-start)
		for _, d := range t.Devices[start:end] {
			ops = append(ops, store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{
				PartitionKey: t.JobID, RowKey: boundaryRowKey(t.Kind, d.ID),
				Properties: store.Properties{propBoundary: d.Boundary}}})
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
