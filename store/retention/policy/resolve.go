package policy

import (
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// Rule is what one policy says of one kind: its retention days (0: no
// purge by age) and its thinning tiers.
type Rule struct {
	Days  int
	Tiers []Tier
}

// Rules resolves cameras' rules of one kind from the policies in force:
// the camera's own policy, else its longest prefix policy, else the
// default, the first that sets the kind (its days or its tiers). It holds
// the default and the prefix policies, which a purge reads once; a
// camera's own policy is read as it is met, since cameras are a fleet.
type Rules struct {
	kind     images.Kind
	def      Rule
	prefixes map[string]Rule
	longest  int
}

// NewRules starts the rules of kind k, with no policy: every camera keeps
// the kind.
func NewRules(k images.Kind) *Rules {
	return &Rules{kind: k, prefixes: map[string]Rule{}}
}

// Add takes in a default or prefix policy (a camera policy is passed to
// For instead); one that does not set the kind is passed by.
func (r *Rules) Add(p Policy) {
	rule, ok := p.Rule(r.kind)
	switch {
	case !ok: // silent on the kind: a less specific policy decides
	case p.Scope == ScopeDefault:
		r.def = rule
	case p.Scope == ScopePrefix:
		r.prefixes[p.Target] = rule
		r.longest = max(r.longest, len(p.Target))
	}
}

// Prefixes is how many prefix policies set the kind.
func (r *Rules) Prefixes() int { return len(r.prefixes) }

// For is the camera's rule: own is its camera policy, if it has one.
func (r *Rules) For(camera string, own *Policy) Rule {
	if own != nil {
		if rule, ok := own.Rule(r.kind); ok {
			return rule
		}
	}
	for i := min(len(camera), r.longest); i > 0; i-- {
		if rule, ok := r.prefixes[camera[:i]]; ok {
			return rule
		}
	}
	return r.def
}

// At resolves the rule at a job's instant now: the boundary before which
// rows go (the start of the minute of the cutoff, since index partitions
// and tallies count minutes; zero when the rule keeps by age) and the
// windows its tiers thin.
func (r Rule) At(now time.Time) (boundary time.Time, thin []Window) {
	if r.Days > 0 {
		boundary = now.Add(-Days(r.Days)).UTC().Truncate(time.Minute)
	}
	return boundary, Windows(now, r.Days, r.Tiers)
}

// CameraRule is one camera's rule of a kind, resolved at a job's instant.
type CameraRule struct {
	// Boundary is the start of the minute of the camera's cutoff; zero
	// when its rule keeps the kind by age.
	Boundary time.Time
	// Purge says the camera's oldest row lies before Boundary and it has
	// no hold.
	Purge bool
	// Thin are its tiers' windows, unless it has a hold or no row in them.
	Thin []Window
	// Held says a legal hold keeps the camera whole that its rule would
	// otherwise purge or thin: such a camera counts as held.
	Held bool
}

// Resolve gives a camera whose oldest row lies in the minute that starts
// at oldest its rule, from its boundary and windows (a purge by cutoff
// passes the job's boundary and none): whether to purge it, and the
// windows that have rows of it. A camera on legal hold keeps everything,
// on every path, which is why every path asks this one function.
func Resolve(boundary time.Time, thin []Window, oldest time.Time, held bool) CameraRule {
	c := CameraRule{Boundary: boundary, Thin: thin}
	if !oldest.Before(NewestThinned(c.Thin)) {
		c.Thin = nil
	}
	c.Purge = !c.Boundary.IsZero() && oldest.Before(c.Boundary)
	if (c.Purge || len(c.Thin) > 0) && held {
		return CameraRule{Boundary: c.Boundary, Held: true}
	}
	return c
}

// Reach is how far the policies in force reach into a kind's images: the
// fewest days any keeps it (0: none sets its days), and the fewest days
// after which any tier thins it (0: none thins it). A purge with policies
// scans no newer part of the kind's index than its reach.
type Reach struct {
	Days, ThinAfter int
}

// Reaches is each kind's reach, for the kinds some policy sets.
type Reaches map[images.Kind]Reach

// Add takes in a policy of any scope.
func (r Reaches) Add(p Policy) {
	low := func(cur, d int) int {
		if d > 0 && (cur == 0 || d < cur) {
			return d
		}
		return cur
	}
	for _, k := range images.Kinds {
		if !p.Sets(k) {
			continue
		}
		rch := r[k]
		rch.Days = low(rch.Days, p.Days[k])
		for _, t := range p.Tiers[k] {
			rch.ThinAfter = low(rch.ThinAfter, t.AfterDays)
		}
		r[k] = rch
	}
}
