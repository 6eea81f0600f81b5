package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// ErrNoPolicies reports a purge with policies while no policy sets a
// retention for any of its kinds.
var ErrNoPolicies = errors.New("retention: no retention policy is in force")

// reaches returns each kind's reach (policy.Reach), for the kinds some
// policy sets. It reads the policies one page at a time.
func (p *Policies) reaches(ctx context.Context) (policy.Reaches, error) {
	out := policy.Reaches{}
	s := store.Scan{}
	for {
		page, err := p.policies.Scan(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			out.Add(policyFromEntity(e))
		}
		if page.Next == nil {
			return out, nil
		}
		s.Resume = page.Next
	}
}

// Rules gives each camera its rule of one kind of one job: in a purge
// by cutoff the job's boundary; in a purge with policies the rule
// policy.Rules resolves. In both, a camera on legal hold keeps everything
// (policy.Resolve). It is the one rule every path that deletes asks: the
// embedded survey and sections, the queue design's plan and dry run; the
// queue design's workers check the holds again before each task
// (spareHeld). The decisions are package policy's; the Rules does the
// reads: with policies it holds the default and the prefix policies that
// set the kind (at most MaxPrefixPolicies) as they stood when it was made,
// and each camera costs a read of its own policy as it stands when asked.
type Rules struct {
	p    *Policies
	kind images.Kind
	// now is the job's instant, from which days are counted.
	now time.Time
	// fixed, in a purge by cutoff, is every camera's boundary.
	fixed time.Time
	// camera, in a delete of one camera (Job.Camera), is the only camera
	// with a boundary: every other keeps everything.
	camera string
	// rules, in a purge with policies, are the default and the prefix
	// policies; nil in a purge by cutoff.
	rules *policy.Rules
	// holds are the cameras on legal hold as last read (refreshHolds).
	holds policy.HoldSet
}

// rules returns the Rules of one kind of j, with the holds as they
// stand now.
func (e *Engine) rules(ctx context.Context, j *Job, kind images.Kind) (*Rules, error) {
	r := &Rules{p: e.policies, kind: kind, now: j.Created, fixed: j.Boundary(), camera: j.Camera}
	if j.UsePolicies {
		if err := r.readPolicies(ctx); err != nil {
			return nil, err
		}
	}
	return r, r.refreshHolds(ctx)
}

// refreshHolds reads the holds again: a hold placed since spares every
// camera resolved from now on.
func (r *Rules) refreshHolds(ctx context.Context) error {
	holds, err := r.p.holdSet(ctx)
	if err == nil {
		r.holds = holds
	}
	return err
}

func (r *Rules) readPolicies(ctx context.Context) error {
	r.rules = policy.NewRules(r.kind)
	def, err := r.p.GetPolicy(ctx, policy.ScopeDefault, "")
	switch {
	case err == nil:
		r.rules.Add(def)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	q := store.Query{PartitionKey: string(policy.ScopePrefix)}
	for {
		page, err := r.p.policies.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			if r.rules.Add(policyFromEntity(e)); r.rules.Prefixes() > MaxPrefixPolicies {
				return fmt.Errorf("%w: more than %d", ErrTooManyPrefixes, MaxPrefixPolicies)
			}
		}
		if page.Next == nil {
			return nil
		}
		q.Resume = page.Next
	}
}

// resolve gives a camera whose oldest row lies in the minute that starts
// at oldest its rule at the job's instant (policy.Resolve).
func (r *Rules) resolve(ctx context.Context, camera string, oldest time.Time) (policy.CameraRule, error) {
	boundary, thin := r.fixed, []policy.Window(nil)
	if r.rules != nil {
		var own *policy.Policy
		switch p, err := r.p.GetPolicy(ctx, policy.ScopeCamera, camera); {
		case err == nil:
			own = &p
		case !errors.Is(err, store.ErrNotFound):
			return policy.CameraRule{}, err
		}
		boundary, thin = r.rules.For(camera, own).At(r.now)
	}
	if r.camera != "" && camera != r.camera {
		boundary = time.Time{}
	}
	return policy.Resolve(boundary, thin, oldest, r.holds.Has(camera)), nil
}
