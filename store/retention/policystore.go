package retention

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// This file is the store of the retention policies and legal holds: their
// tables, rows and reads and writes. What a policy or a hold is, and what
// it decides, is package policy's, which does no I/O.

// Default tables of the retention policies and legal holds.
const (
	DefaultPoliciesTable = "RetentionPolicies"
	DefaultHoldsTable    = "LegalHolds"
)

// MaxPrefixPolicies bounds the prefix policies: a purge holds them all in
// memory (about 300 bytes each at most), while camera policies and holds
// are read one camera at a time.
const MaxPrefixPolicies = 10_000

// ErrTooManyPrefixes reports a prefix policy beyond MaxPrefixPolicies.
var ErrTooManyPrefixes = errors.New("retention: too many prefix policies")

// Property names of policy and hold rows. Days are kept per kind as
// Int32 properties, so the table reads well in a storage browser.
const (
	propUpdated = "Updated"
	propReason  = "Reason"
	propHeldAt  = "Created"
	holdsPart   = "hold"
)

func daysProperty(k images.Kind) string {
	switch k {
	case images.Single:
		return "SingleDays"
	case images.Pano:
		return "PanoDays"
	case images.PreStitch:
		return "PreStitchDays"
	}
	return ""
}

func tiersProperty(k images.Kind) string {
	if p := daysProperty(k); p != "" {
		return strings.TrimSuffix(p, "Days") + "Thinning"
	}
	return ""
}

func policyKey(scope policy.Scope, target string) (string, string) {
	if scope == policy.ScopeDefault {
		return string(policy.ScopeDefault), string(policy.ScopeDefault)
	}
	return string(scope), target
}

func policyEntity(p policy.Policy) store.Entity {
	pk, rk := policyKey(p.Scope, p.Target)
	props := store.Properties{propUpdated: p.Updated}
	for _, k := range images.Kinds {
		if d := p.Days[k]; d > 0 {
			props[daysProperty(k)] = int32(d)
		}
		if t := p.Tiers[k]; len(t) > 0 {
			props[tiersProperty(k)] = encodeTiers(t)
		}
	}
	return store.Entity{PartitionKey: pk, RowKey: rk, Properties: props}
}

func policyFromEntity(e store.Entity) policy.Policy {
	p := policy.Policy{Scope: policy.Scope(e.PartitionKey), Days: map[images.Kind]int{}, Tiers: map[images.Kind][]policy.Tier{}, ETag: e.ETag}
	if p.Scope != policy.ScopeDefault {
		p.Target = e.RowKey
	}
	for _, k := range images.Kinds {
		if d, ok := e.Properties[daysProperty(k)].(int32); ok && d > 0 {
			p.Days[k] = int(d)
		}
		// Only encodeTiers writes the property; one that does not read
		// thins nothing, the safe way to be wrong.
		if s, ok := e.Properties[tiersProperty(k)].(string); ok {
			if t, err := decodeTiers(s); err == nil && len(t) > 0 {
				p.Tiers[k] = t
			}
		}
	}
	p.Updated, _ = e.Properties[propUpdated].(time.Time)
	return p
}

func holdEntity(h policy.Hold) store.Entity {
	return store.Entity{PartitionKey: holdsPart, RowKey: h.CameraID, Properties: store.Properties{
		propReason: h.Reason, propHeldAt: h.Created, propUpdated: h.Updated}}
}

func holdFromEntity(e store.Entity) policy.Hold {
	h := policy.Hold{CameraID: e.RowKey, ETag: e.ETag}
	h.Reason, _ = e.Properties[propReason].(string)
	h.Created, _ = e.Properties[propHeldAt].(time.Time)
	h.Updated, _ = e.Properties[propUpdated].(time.Time)
	return h
}

// Policies keeps the retention policies and legal holds in tables of the
// store, so every process sharing it sees the same.
type Policies struct {
	policies store.Table
	holds    store.Table
	now      func() time.Time
	// maxPrefixes is MaxPrefixPolicies unless a test lowers it.
	maxPrefixes int
}

func (p *Policies) prefixCap() int {
	if p.maxPrefixes > 0 {
		return p.maxPrefixes
	}
	return MaxPrefixPolicies
}

func (p *Policies) stamp() time.Time { return store.TruncateToTicks(p.now().UTC()) }

// CreatePolicy stores a new policy; store.ErrAlreadyExists if its scope
// and target have one, ErrTooManyPrefixes beyond MaxPrefixPolicies.
func (p *Policies) CreatePolicy(ctx context.Context, pol policy.Policy) (policy.Policy, error) {
	if err := checkTarget(pol.Scope, pol.Target); err != nil {
		return policy.Policy{}, err
	}
	if err := pol.Check(); err != nil {
		return policy.Policy{}, err
	}
	pol.Updated = p.stamp()
	written, err := p.insert(ctx, policyEntity(pol))
	if err != nil {
		return policy.Policy{}, err
	}
	pol.ETag = written.ETag
	return pol, nil
}

// insert adds a policy's row: a prefix policy's with its count (see
// insertPrefix).
func (p *Policies) insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	if e.PartitionKey == string(policy.ScopePrefix) {
		return p.insertPrefix(ctx, e)
	}
	return p.policies.Insert(ctx, e)
}

// GetPolicy reads one policy; store.ErrNotFound if there is none.
func (p *Policies) GetPolicy(ctx context.Context, scope policy.Scope, target string) (policy.Policy, error) {
	if err := checkTarget(scope, target); err != nil {
		return policy.Policy{}, fmt.Errorf("retention: no %s policy %q: %w", scope, target, store.ErrNotFound)
	}
	pk, rk := policyKey(scope, target)
	e, err := p.policies.Get(ctx, pk, rk)
	if err != nil {
		return policy.Policy{}, err
	}
	return policyFromEntity(e), nil
}

// ListPolicies returns a page of up to limit policies: the camera
// policies by camera id, the default, then the prefix policies by prefix.
func (p *Policies) ListPolicies(ctx context.Context, limit int, resume *store.Cursor) ([]policy.Policy, *store.Cursor, error) {
	return store.ReadPage(limit, resume, func(resume *store.Cursor, want int) (store.Page, error) {
		page, err := p.policies.Scan(ctx, store.Scan{Limit: want, Resume: resume})
		page.Entities = slices.DeleteFunc(page.Entities, isPrefixCount)
		return page, err
	}, store.Decoded(policyFromEntity))
}

// PolicyUpdate changes the days or tiers of some kinds of one policy.
type PolicyUpdate struct {
	// Policy names the policy and holds the new days of Kinds and tiers
	// of Thinning.
	Policy policy.Policy
	// Kinds are the kinds whose days change; 0 or missing clears them.
	Kinds []images.Kind
	// Thinning are the kinds whose tiers change; none clears them. The
	// policy as updated must pass policy.CheckTiers (else a *policy.Error).
	Thinning []images.Kind
	// AllowMissing creates the policy if there is none.
	AllowMissing bool
	// IfMatch, when set, is the ETag the stored policy must have:
	// store.ErrConflict when it has another.
	IfMatch string
}

// UpdatePolicy applies u and returns the policy as stored.
func (p *Policies) UpdatePolicy(ctx context.Context, u PolicyUpdate) (policy.Policy, error) {
	if err := checkTarget(u.Policy.Scope, u.Policy.Target); err != nil {
		return policy.Policy{}, err
	}
	pk, rk := policyKey(u.Policy.Scope, u.Policy.Target)
	var out policy.Policy
	err := p.update(ctx, p.policies, pk, rk, u.IfMatch, u.AllowMissing, func(stored *store.Entity) (store.Entity, error) {
		pol := policy.Policy{Scope: u.Policy.Scope, Target: u.Policy.Target, Days: map[images.Kind]int{}}
		if stored != nil {
			pol = policyFromEntity(*stored)
		}
		pol.Days, pol.Tiers = maps.Clone(pol.Days), maps.Clone(pol.Tiers)
		if pol.Tiers == nil {
			pol.Tiers = map[images.Kind][]policy.Tier{}
		}
		for _, k := range u.Kinds {
			pol.Days[k] = u.Policy.Days[k]
		}
		for _, k := range u.Thinning {
			pol.Tiers[k] = u.Policy.Tiers[k]
		}
		if err := pol.Check(); err != nil {
			return store.Entity{}, err
		}
		pol.Updated = p.stamp()
		out = pol
		return policyEntity(pol), nil
	}, func(written store.Entity) { out.ETag = written.ETag })
	return out, err
}

// DeletePolicy deletes one policy; store.ErrNotFound if there is none,
// store.ErrConflict if ifMatch is set and stale.
func (p *Policies) DeletePolicy(ctx context.Context, scope policy.Scope, target, ifMatch string) error {
	if err := checkTarget(scope, target); err != nil {
		return err
	}
	pk, rk := policyKey(scope, target)
	if scope == policy.ScopePrefix {
		return p.deletePrefix(ctx, rk, ifMatch)
	}
	return p.policies.Delete(ctx, pk, rk, ifMatch)
}

// CreateHold places a legal hold on a camera; store.ErrAlreadyExists if it
// has one.
func (p *Policies) CreateHold(ctx context.Context, h policy.Hold) (policy.Hold, error) {
	h.Created = p.stamp()
	h.Updated = h.Created
	written, err := p.holds.Insert(ctx, holdEntity(h))
	if err != nil {
		return policy.Hold{}, err
	}
	h.ETag = written.ETag
	return h, nil
}

// GetHold reads a camera's legal hold; store.ErrNotFound if it has none.
func (p *Policies) GetHold(ctx context.Context, cameraID string) (policy.Hold, error) {
	e, err := p.holds.Get(ctx, holdsPart, cameraID)
	if err != nil {
		return policy.Hold{}, err
	}
	return holdFromEntity(e), nil
}

// ListHolds returns a page of up to limit holds, by camera id.
func (p *Policies) ListHolds(ctx context.Context, limit int, resume *store.Cursor) ([]policy.Hold, *store.Cursor, error) {
	return store.ReadPage(limit, resume, func(resume *store.Cursor, want int) (store.Page, error) {
		return p.holds.Query(ctx, store.Query{PartitionKey: holdsPart, Limit: want, Resume: resume})
	}, store.Decoded(holdFromEntity))
}

// UpdateHold changes a hold's reason; store.ErrNotFound if the camera has
// no hold, store.ErrConflict if ifMatch is set and stale.
func (p *Policies) UpdateHold(ctx context.Context, h policy.Hold, ifMatch string) (policy.Hold, error) {
	var out policy.Hold
	err := p.update(ctx, p.holds, holdsPart, h.CameraID, ifMatch, false, func(stored *store.Entity) (store.Entity, error) {
		out = holdFromEntity(*stored)
		out.Reason, out.Updated = h.Reason, p.stamp()
		return holdEntity(out), nil
	}, func(written store.Entity) { out.ETag = written.ETag })
	return out, err
}

// DeleteHold releases a camera's hold: the next purge may delete its
// expired images. store.ErrNotFound if it has none.
func (p *Policies) DeleteHold(ctx context.Context, cameraID, ifMatch string) error {
	return p.holds.Delete(ctx, holdsPart, cameraID, ifMatch)
}

// update is a read-change-write of one row at the version read, retried
// when another writer comes between, unless the caller holds an ETag of
// its own (its view is stale then). change gets nil for a missing row,
// which is store.ErrNotFound unless allowMissing.
func (p *Policies) update(ctx context.Context, t store.Table, pk, rk, ifMatch string, allowMissing bool,
	change func(stored *store.Entity) (store.Entity, error), written func(store.Entity)) error {
	insert := t.Insert
	if t == p.policies {
		insert = p.insert
	}
	for attempt := 1; ; attempt++ {
		stored, err := t.Get(ctx, pk, rk)
		found := err == nil
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		case !found && (!allowMissing || ifMatch != ""):
			return fmt.Errorf("retention: %s/%s: %w", pk, rk, store.ErrNotFound)
		case found && ifMatch != "" && ifMatch != stored.ETag:
			return fmt.Errorf("retention: %s/%s changed since etag %s: %w", pk, rk, ifMatch, store.ErrConflict)
		}
		var from *store.Entity
		if found {
			from = &stored
		}
		e, err := change(from)
		if err != nil {
			return err
		}
		var w store.Entity
		if found {
			w, err = t.Update(ctx, e, store.Replace, stored.ETag)
		} else {
			w, err = insert(ctx, e)
		}
		if err == nil {
			written(w)
			return nil
		}
		raced := errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists)
		if !raced || ifMatch != "" || attempt == casAttempts {
			return err
		}
	}
}

// encodeTiers writes tiers as a policy row's property: "after:minutes:until"
// per tier, comma-separated, readable in a storage browser.
func encodeTiers(tiers []policy.Tier) string {
	parts := make([]string, len(tiers))
	for i, t := range tiers {
		parts[i] = fmt.Sprintf("%d:%d:%d", t.AfterDays, t.KeepOnePer/time.Minute, t.UntilDays)
	}
	return strings.Join(parts, ",")
}

// decodeTiers reads encodeTiers' form.
func decodeTiers(s string) ([]policy.Tier, error) {
	if s == "" {
		return nil, nil
	}
	var out []policy.Tier
	for part := range strings.SplitSeq(s, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("retention: tier %q is not after:minutes:until", part)
		}
		var n [3]int
		for i := range f {
			v, err := strconv.Atoi(f[i])
			if err != nil {
				return nil, fmt.Errorf("retention: tier %q: %w", part, err)
			}
			n[i] = v
		}
		out = append(out, policy.Tier{AfterDays: n[0], KeepOnePer: time.Duration(n[1]) * time.Minute, UntilDays: n[2]})
	}
	return out, nil
}
