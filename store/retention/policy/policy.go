package policy

import (
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// Scope says which cameras a policy covers.
type Scope string

// The policy scopes, from the least to the most specific.
const (
	// ScopeDefault covers every camera.
	ScopeDefault Scope = "default"
	// ScopePrefix covers the cameras whose id starts with the target; the
	// longest matching prefix wins.
	ScopePrefix Scope = "prefix"
	// ScopeCamera covers the camera whose id is the target.
	ScopeCamera Scope = "camera"
)

// Policy is how long the images of some cameras are kept.
type Policy struct {
	Scope Scope
	// Target is the camera id (ScopeCamera) or the id prefix (ScopePrefix);
	// empty for ScopeDefault.
	Target string
	// Days is the retention of each kind, in days (see Days); a kind
	// missing or 0 is left to the next less specific policy, and with none
	// the kind's images are kept by purges with policies.
	Days map[images.Kind]int
	// Tiers thin each kind's images past their full retention (see Tier);
	// a kind's days and tiers always come from the same policy, the most
	// specific that sets either.
	Tiers map[images.Kind][]Tier
	// Updated is when the policy was last written.
	Updated time.Time
	// ETag is the stored version, for conditional updates and deletes.
	ETag string
}

// Sets reports whether the policy sets kind k: its days or its tiers. A
// policy that sets neither leaves the kind to the next less specific one.
func (p Policy) Sets(k images.Kind) bool { return p.Days[k] > 0 || len(p.Tiers[k]) > 0 }

// Rule is what the policy says of kind k, and whether it says anything:
// days and tiers come together, so that a camera policy's tiers never
// thin up to a prefix policy's days.
func (p Policy) Rule(k images.Kind) (Rule, bool) {
	return Rule{Days: p.Days[k], Tiers: p.Tiers[k]}, p.Sets(k)
}

// Check applies CheckTiers to every kind, with the floor of one day (the
// server applies its own floor to what a request sends): a *Error names
// the first problem.
func (p Policy) Check() error {
	for _, k := range images.Kinds {
		if probs := CheckTiers(p.Days[k], p.Tiers[k], 1); len(probs) > 0 {
			return &Error{Kind: k, TierProblem: probs[0]}
		}
	}
	return nil
}

// Error is a policy whose tiers do not fit together or with its days,
// found where an update's fields meet the stored ones.
type Error struct {
	Kind images.Kind
	TierProblem
}

func (e *Error) Error() string {
	return fmt.Sprintf("retention: %s thinning tier %d %s: %s", e.Kind, e.Tier, e.Field, e.Problem)
}

// Hold is a legal hold: nothing of its camera is deleted while it stands,
// by any purge, thinning pass or storage budget (see HoldSet).
type Hold struct {
	CameraID string
	// Reason says why, for operators.
	Reason  string
	Created time.Time
	// Updated is when the hold was last written.
	Updated time.Time
	ETag    string
}

// HoldSet is every camera on legal hold, read whole. A hold is absolute:
// no purge, thinning pass or storage budget deletes anything of a held
// camera, whatever its retention says. Holds are few (a case's cameras,
// not a fleet), so a purge reads them all at its start and again before
// each section or task, and checks each camera in memory: the cost of
// checking follows the holds, never the cameras.
type HoldSet map[string]struct{}

// Add puts a camera on the set.
func (h HoldSet) Add(camera string) { h[camera] = struct{}{} }

// Has reports whether the camera is on legal hold.
func (h HoldSet) Has(camera string) bool {
	_, ok := h[camera]
	return ok
}
