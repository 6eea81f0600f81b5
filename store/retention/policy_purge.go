package retention

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// ErrNoPolicies reports a purge with policies while no policy sets a
// retention for any of its kinds.
var ErrNoPolicies = errors.New("retention: no retention policy is in force")

// reach is how far the policies in force reach into a kind's images: the
// fewest days any keeps it (0: none sets its days), and the fewest days
// after which any tier thins it (0: none thins it).
type reach struct {
	days, thinAfter int
}

// reaches returns each kind's reach, for the kinds some policy sets. It
// reads the policies one page at a time.
func (p *Policies) reaches(ctx context.Context) (map[images.Kind]reach, error) {
	out := map[images.Kind]reach{}
	low := func(cur, d int) int {
		if d > 0 && (cur == 0 || d < cur) {
			return d
		}
		return cur
	}
	s := store.Scan{}
	for {
		page, err := p.policies.Scan(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			pol := policyFromEntity(e)
			for _, k := range images.Kinds {
				if !pol.sets(k) {
					continue
				}
				r := out[k]
				r.days = low(r.days, pol.Days[k])
				for _, t := range pol.Tiers[k] {
					r.thinAfter = low(r.thinAfter, t.AfterDays)
				}
				out[k] = r
			}
		}
		if page.Next == nil {
			return out, nil
		}
		s.Resume = page.Next
	}
}

// kindRule is what one policy says of one kind.
type kindRule struct {
	days  int
	tiers []Tier
}

func ruleOf(p Policy, k images.Kind) (kindRule, bool) {
	return kindRule{days: p.Days[k], tiers: p.Tiers[k]}, p.sets(k)
}

// resolver gives each camera its rule of one kind of one job: in a purge
// by cutoff the job's boundary; in a purge with policies the camera's own
// policy, else the longest prefix policy, else the default, the first that
// sets the kind (its days or its tiers). In both, a camera on legal hold
// keeps everything (holdset.go). It is the one rule every path that
// deletes asks: the embedded survey and sections, the queue design's plan
// and dry run; the queue design's workers check the holds again before
// each task (spareHeld). With policies it holds the default and the
// prefix policies that set the kind (at most MaxPrefixPolicies) as they
// stood when it was made; each camera costs a read of its own policy as it
// stands when asked.
type resolver struct {
	p    *Policies
	kind images.Kind
	// now is the job's instant, from which days are counted.
	now time.Time
	// fixed, in a purge by cutoff, is every camera's boundary.
	fixed time.Time
	// policies says the job uses them: def and prefixes are read.
	policies bool
	def      kindRule
	prefixes map[string]kindRule
	longest  int
	// holds are the cameras on legal hold as last read (refreshHolds).
	holds holdSet
}

// rules returns the resolver of one kind of j, with the holds as they
// stand now.
func (e *Engine) rules(ctx context.Context, j *Job, kind images.Kind) (*resolver, error) {
	r := &resolver{p: e.policies, kind: kind, now: j.Created, fixed: j.Boundary(), policies: j.UsePolicies}
	if j.UsePolicies {
		if err := r.readPolicies(ctx); err != nil {
			return nil, err
		}
	}
	return r, r.refreshHolds(ctx)
}

// refreshHolds reads the holds again: a hold placed since spares every
// camera resolved from now on.
func (r *resolver) refreshHolds(ctx context.Context) error {
	holds, err := r.p.holdSet(ctx)
	if err == nil {
		r.holds = holds
	}
	return err
}

func (r *resolver) readPolicies(ctx context.Context) error {
	r.prefixes = map[string]kindRule{}
	def, err := r.p.GetPolicy(ctx, ScopeDefault, "")
	switch {
	case err == nil:
		r.def, _ = ruleOf(def, r.kind)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	q := store.Query{PartitionKey: string(ScopePrefix)}
	for {
		page, err := r.p.policies.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			if rule, ok := ruleOf(policyFromEntity(e), r.kind); ok {
				if len(r.prefixes) >= MaxPrefixPolicies {
					return fmt.Errorf("%w: more than %d", ErrTooManyPrefixes, MaxPrefixPolicies)
				}
				r.prefixes[e.RowKey] = rule
				r.longest = max(r.longest, len(e.RowKey))
			}
		}
		if page.Next == nil {
			return nil
		}
		q.Resume = page.Next
	}
}

// plan resolves a camera met first at its oldest index row (see resolve).
func (r *resolver) plan(ctx context.Context, camera string, oldest images.IndexRow) (cameraRule, error) {
	minute, err := time.Parse("200601021504", oldest.PartitionKey[:min(len(oldest.PartitionKey), 12)])
	if err != nil {
		return cameraRule{}, fmt.Errorf("retention: index partition %q: %w", oldest.PartitionKey, err)
	}
	return r.resolve(ctx, camera, minute)
}

// cameraRule is one camera's rule of a kind, resolved at the job's
// instant.
type cameraRule struct {
	// boundary is the start of the minute of the camera's cutoff; zero
	// when its policy keeps the kind by age.
	boundary time.Time
	// purge says the camera's oldest row lies before boundary and it has
	// no hold.
	purge bool
	// thin are its tiers' windows, unless it has a hold or no row in them.
	thin []thinWindow
	// held says a legal hold keeps the camera whole that its rule would
	// otherwise purge or thin: such a camera counts in Counts.DevicesHeld.
	held bool
}

// resolve gives a camera whose oldest row lies in the minute that starts
// at oldest its boundary, whether to purge it (its oldest row is before
// the boundary and it has no legal hold), and the windows its tiers thin.
func (r *resolver) resolve(ctx context.Context, camera string, oldest time.Time) (cameraRule, error) {
	var c cameraRule
	if r.policies {
		rule, err := r.ruleOf(ctx, camera)
		if err != nil {
			return cameraRule{}, err
		}
		if rule.days > 0 {
			c.boundary = r.now.Add(-Days(rule.days)).UTC().Truncate(time.Minute)
		}
		if c.thin = thinWindows(r.now, rule.days, rule.tiers); !oldest.Before(newestThinned(c.thin)) {
			c.thin = nil
		}
	} else {
		c.boundary = r.fixed
	}
	c.purge = !c.boundary.IsZero() && oldest.Before(c.boundary)
	if (c.purge || len(c.thin) > 0) && r.holds.has(camera) {
		return cameraRule{boundary: c.boundary, held: true}, nil
	}
	return c, nil
}

// ruleOf is the kind's rule of the policy that covers the camera.
func (r *resolver) ruleOf(ctx context.Context, camera string) (kindRule, error) {
	own, err := r.p.GetPolicy(ctx, ScopeCamera, camera)
	switch {
	case err == nil:
		if rule, found := ruleOf(own, r.kind); found {
			return rule, nil
		}
	case !errors.Is(err, store.ErrNotFound):
		return kindRule{}, err
	}
	for i := min(len(camera), r.longest); i > 0; i-- {
		if rule, found := r.prefixes[camera[:i]]; found {
			return rule, nil
		}
	}
	return r.def, nil
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
