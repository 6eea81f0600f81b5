package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/diskspace"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// Resource names of policies and holds (see RetentionPolicy.name and
// LegalHold.name). Camera ids and prefixes hold no "/", so a name reads
// one way only.
const (
	policyDefaultName  = "retentionPolicies/default"
	policyCameraPrefix = "retentionPolicies/cameras/"
	policyPrefixPrefix = "retentionPolicies/prefixes/"
	holdNamePrefix     = "legalHolds/"
	// maxHoldReasonBytes bounds a hold's reason.
	maxHoldReasonBytes = 1024
)

// policyPaths are the update_mask paths of a policy, in field order, and
// the image kinds whose days and tiers they change.
var policyPaths = []struct {
	path, thinning string
	kind           images.Kind
}{
	{"single_retention_days", "single_thinning", images.Single},
	{"pano_retention_days", "pano_thinning", images.Pano},
	{"pre_stitch_retention_days", "pre_stitch_thinning", images.PreStitch},
}

func policyName(p policy.Policy) string {
	switch p.Scope {
	case policy.ScopeCamera:
		return policyCameraPrefix + p.Target
	case policy.ScopePrefix:
		return policyPrefixPrefix + p.Target
	}
	return policyDefaultName
}

func policyMessage(p policy.Policy) *metadatav1.RetentionPolicy {
	return &metadatav1.RetentionPolicy{
		Name:                   policyName(p),
		SingleRetentionDays:    int32(p.Days[images.Single]),
		PanoRetentionDays:      int32(p.Days[images.Pano]),
		PreStitchRetentionDays: int32(p.Days[images.PreStitch]),
		UpdateTime:             optionalTimestamp(p.Updated),
		Etag:                   p.ETag,
		SingleThinning:         tierMessages(p.Tiers[images.Single]),
		PanoThinning:           tierMessages(p.Tiers[images.Pano]),
		PreStitchThinning:      tierMessages(p.Tiers[images.PreStitch]),
	}
}

func tierMessages(tiers []policy.Tier) []*metadatav1.ThinningTier {
	var out []*metadatav1.ThinningTier
	for _, t := range tiers {
		out = append(out, &metadatav1.ThinningTier{AfterDays: int32(t.AfterDays),
			KeepOnePer: durationpb.New(t.KeepOnePer), UntilDays: int32(t.UntilDays)})
	}
	return out
}

// policyTiers are a policy message's tiers, in policyPaths' order.
func policyTiers(m *metadatav1.RetentionPolicy) [][]*metadatav1.ThinningTier {
	return [][]*metadatav1.ThinningTier{m.GetSingleThinning(), m.GetPanoThinning(), m.GetPreStitchThinning()}
}

// checkTiers reads a kind's tiers from field and checks them with
// policy.CheckTiers against days, the kind's retention in the request
// (-1 when the update leaves the stored days: only the tiers' own order
// is checked here, and the merged policy by the update).
func (v *violations) checkTiers(field string, msgs []*metadatav1.ThinningTier, days, floor int32) []policy.Tier {
	tiers := make([]policy.Tier, 0, len(msgs))
	unread := map[int]bool{} // tiers whose keep_one_per is reported here
	for i, m := range msgs {
		t := policy.Tier{AfterDays: int(m.GetAfterDays()), UntilDays: int(m.GetUntilDays())}
		switch d := m.GetKeepOnePer(); {
		case d == nil:
			v.add(fmt.Sprintf("%s[%d].keep_one_per", field, i), "required")
			unread[i] = true
		case d.CheckValid() != nil:
			v.add(fmt.Sprintf("%s[%d].keep_one_per", field, i), "not a valid duration")
			unread[i] = true
		default:
			t.KeepOnePer = d.AsDuration()
		}
		tiers = append(tiers, t)
	}
	against := int(max(days, 0))
	for _, p := range policy.CheckTiers(against, tiers, int(floor)) {
		if p.Field == "keep_one_per" && unread[p.Tier] {
			continue // reported above; a "0s" read is CheckTiers' to refuse
		}
		v.add(tierField(field, p), p.Problem)
	}
	return tiers
}

func tierField(field string, p policy.TierProblem) string {
	if p.Tier < 0 {
		return field
	}
	return fmt.Sprintf("%s[%d].%s", field, p.Tier, p.Field)
}

func holdMessage(h policy.Hold) *metadatav1.LegalHold {
	return &metadatav1.LegalHold{
		Name:       holdNamePrefix + h.CameraID,
		Reason:     h.Reason,
		CreateTime: optionalTimestamp(h.Created),
		UpdateTime: optionalTimestamp(h.Updated),
		Etag:       h.ETag,
	}
}

// checkPolicyName reads a policy's resource name.
func (v *violations) checkPolicyName(field, name string) (policy.Scope, string) {
	if name == policyDefaultName {
		return policy.ScopeDefault, ""
	}
	if id, ok := strings.CutPrefix(name, policyCameraPrefix); ok {
		v.checkCameraID(field, id)
		return policy.ScopeCamera, id
	}
	if prefix, ok := strings.CutPrefix(name, policyPrefixPrefix); ok {
		v.checkCameraID(field, prefix)
		return policy.ScopePrefix, prefix
	}
	if name == "" {
		v.add(field, "required")
	} else {
		v.add(field, fmt.Sprintf("must be %q, %q or %q", policyDefaultName, policyCameraPrefix+"{camera_id}", policyPrefixPrefix+"{prefix}"))
	}
	return "", ""
}

// checkHoldName reads a hold's resource name and returns its camera.
func (v *violations) checkHoldName(field, name string) string {
	id, ok := strings.CutPrefix(name, holdNamePrefix)
	if !ok {
		v.add(field, fmt.Sprintf("must be %q", holdNamePrefix+"{camera_id}"))
		return ""
	}
	v.checkCameraID(field, id)
	return id
}

// checkDays applies StartPurge's rules to a policy's days: 0 leaves the
// kind to the next policy, else the floor and the ceiling of retention_days.
func (v *violations) checkDays(field string, days, floor int32) {
	switch {
	case days < 0:
		v.add(field, "must not be negative")
	case days > 0 && days < floor:
		v.add(field, fmt.Sprintf("must be 0 (left to the next policy) or at least %d", floor))
	case days > maxRetentionDays:
		v.add(field, fmt.Sprintf("must be at most %d", maxRetentionDays))
	}
}

// toPolicy checks a policy message and reads it; whole says it is the
// whole policy (a create), so that its tiers are checked against its days.
func (v *violations) toPolicy(field string, m *metadatav1.RetentionPolicy, floor int32, whole bool) policy.Policy {
	scope, target := v.checkPolicyName(field+".name", m.GetName())
	days := []int32{m.GetSingleRetentionDays(), m.GetPanoRetentionDays(), m.GetPreStitchRetentionDays()}
	p := policy.Policy{Scope: scope, Target: target, Days: map[images.Kind]int{}, Tiers: map[images.Kind][]policy.Tier{}}
	for i, pp := range policyPaths {
		v.checkDays(field+"."+pp.path, days[i], floor)
		if days[i] > 0 {
			p.Days[pp.kind] = int(days[i])
		}
		against := days[i]
		if !whole {
			against = -1
		}
		if tiers := v.checkTiers(field+"."+pp.thinning, policyTiers(m)[i], against, floor); len(tiers) > 0 {
			p.Tiers[pp.kind] = tiers
		}
	}
	return p
}

// checkPolicyMask returns the kinds whose days and whose tiers an update
// changes. An empty mask names the fields m sets (days other than 0, or
// tiers; AIP-134); "*" alone names all.
func (v *violations) checkPolicyMask(mask *fieldmaskpb.FieldMask, p policy.Policy) (days, thinning []images.Kind) {
	paths := mask.GetPaths()
	switch {
	case len(paths) == 0:
		for _, pp := range policyPaths {
			if p.Days[pp.kind] > 0 {
				days = append(days, pp.kind)
			}
			if len(p.Tiers[pp.kind]) > 0 {
				thinning = append(thinning, pp.kind)
			}
		}
		return days, thinning
	case len(paths) == 1 && paths[0] == "*":
		for _, pp := range policyPaths {
			days, thinning = append(days, pp.kind), append(thinning, pp.kind)
		}
		return days, thinning
	}
paths:
	for i, path := range paths {
		for _, pp := range policyPaths {
			switch path {
			case pp.path:
				days = append(days, pp.kind)
				continue paths
			case pp.thinning:
				thinning = append(thinning, pp.kind)
				continue paths
			}
		}
		v.maskViolation(i, path, "name", "update_time", "etag")
	}
	return days, thinning
}

// maskViolation reports path i of an update_mask that names no updatable field.
func (v *violations) maskViolation(i int, path string, immutable ...string) {
	field := fmt.Sprintf("update_mask.paths[%d]", i)
	switch {
	case path == "*":
		v.add(field, `"*" must be the only path`)
	case slices.Contains(immutable, path):
		v.add(field, fmt.Sprintf("%s cannot be updated", path))
	default:
		v.add(field, fmt.Sprintf("unknown field %q", bounded(path, maxEchoBytes)))
	}
}

// policyStatus maps an error about the resource name to a status.
func (s *retentionService) policyStatus(ctx context.Context, name string, err error) error {
	name = bounded(name, maxEchoBytes)
	return errorWords{messages: map[error]string{
		store.ErrNotFound:      name + " not found",
		store.ErrAlreadyExists: name + " already exists",
		store.ErrConflict:      name + " is not the version the request expects (etag); read it again and retry",
	}, resource: map[string]string{"name": name}}.status(ctx, s.log, err)
}

func (s *retentionService) CreateRetentionPolicy(ctx context.Context, req *metadatav1.CreateRetentionPolicyRequest) (*metadatav1.CreateRetentionPolicyResponse, error) {
	var v violations
	m := req.GetRetentionPolicy()
	if m == nil {
		v.add("retention_policy", "required")
		return nil, v.err()
	}
	p := v.toPolicy("retention_policy", m, s.minDays, true)
	if err := v.err(); err != nil {
		return nil, err
	}
	created, err := s.engine.Policies().CreatePolicy(ctx, p)
	if err != nil {
		return nil, s.policyStatus(ctx, m.GetName(), err)
	}
	s.log.Info("retention policy created", "name", m.GetName())
	return &metadatav1.CreateRetentionPolicyResponse{RetentionPolicy: policyMessage(created)}, nil
}

func (s *retentionService) GetRetentionPolicy(ctx context.Context, req *metadatav1.GetRetentionPolicyRequest) (*metadatav1.GetRetentionPolicyResponse, error) {
	var v violations
	scope, target := v.checkPolicyName("name", req.GetName())
	if err := v.err(); err != nil {
		return nil, err
	}
	p, err := s.engine.Policies().GetPolicy(ctx, scope, target)
	if err != nil {
		return nil, s.policyStatus(ctx, req.GetName(), err)
	}
	return &metadatav1.GetRetentionPolicyResponse{RetentionPolicy: policyMessage(p)}, nil
}

func (s *retentionService) ListRetentionPolicies(ctx context.Context, req *metadatav1.ListRetentionPoliciesRequest) (*metadatav1.ListRetentionPoliciesResponse, error) {
	var v violations
	var err error
	resp := &metadatav1.ListRetentionPoliciesResponse{}
	resp.RetentionPolicies, resp.NextPageToken, err = readPage(ctx, s.log, &v, pageQuery{
		method:   metadatav1.RetentionService_ListRetentionPolicies_FullMethodName,
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	}, func(limit int, resume *store.Cursor) ([]policy.Policy, *store.Cursor, error) {
		return s.engine.Policies().ListPolicies(ctx, limit, resume)
	}, policyMessage)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *retentionService) UpdateRetentionPolicy(ctx context.Context, req *metadatav1.UpdateRetentionPolicyRequest) (*metadatav1.UpdateRetentionPolicyResponse, error) {
	var v violations
	m := req.GetRetentionPolicy()
	if m == nil {
		v.add("retention_policy", "required")
		return nil, v.err()
	}
	p := v.toPolicy("retention_policy", m, s.minDays, false)
	kinds, thinning := v.checkPolicyMask(req.GetUpdateMask(), p)
	v.checkETag("retention_policy.etag", m.GetEtag())
	if err := v.err(); err != nil {
		return nil, err
	}
	updated, err := s.engine.Policies().UpdatePolicy(ctx, retention.PolicyUpdate{
		Policy: p, Kinds: kinds, Thinning: thinning, AllowMissing: req.GetAllowMissing(), IfMatch: m.GetEtag(),
	})
	if perr := (*policy.Error)(nil); errors.As(err, &perr) {
		// The update's fields and the stored ones disagree (tiers past the
		// days kept): name the field of the kind's tiers.
		for _, pp := range policyPaths {
			if pp.kind == perr.Kind {
				v.add(tierField("retention_policy."+pp.thinning, perr.TierProblem), perr.Problem+" (as updated)")
			}
		}
		return nil, v.err()
	}
	if err != nil {
		return nil, s.policyStatus(ctx, m.GetName(), err)
	}
	s.log.Info("retention policy updated", "name", m.GetName())
	return &metadatav1.UpdateRetentionPolicyResponse{RetentionPolicy: policyMessage(updated)}, nil
}

func (s *retentionService) DeleteRetentionPolicy(ctx context.Context, req *metadatav1.DeleteRetentionPolicyRequest) (*metadatav1.DeleteRetentionPolicyResponse, error) {
	var v violations
	scope, target := v.checkPolicyName("name", req.GetName())
	v.checkETag("etag", req.GetEtag())
	if err := v.err(); err != nil {
		return nil, err
	}
	if err := s.engine.Policies().DeletePolicy(ctx, scope, target, req.GetEtag()); err != nil {
		return nil, s.policyStatus(ctx, req.GetName(), err)
	}
	s.log.Info("retention policy deleted", "name", req.GetName())
	return &metadatav1.DeleteRetentionPolicyResponse{}, nil
}

// toHold checks a hold message and reads it.
func (v *violations) toHold(m *metadatav1.LegalHold) policy.Hold {
	h := policy.Hold{CameraID: v.checkHoldName("legal_hold.name", m.GetName()), Reason: m.GetReason()}
	if len(h.Reason) > maxHoldReasonBytes {
		v.add("legal_hold.reason", fmt.Sprintf("must be at most %d bytes, is %d", maxHoldReasonBytes, len(h.Reason)))
	}
	return h
}

func (s *retentionService) CreateLegalHold(ctx context.Context, req *metadatav1.CreateLegalHoldRequest) (*metadatav1.CreateLegalHoldResponse, error) {
	var v violations
	m := req.GetLegalHold()
	if m == nil {
		v.add("legal_hold", "required")
		return nil, v.err()
	}
	h := v.toHold(m)
	if err := v.err(); err != nil {
		return nil, err
	}
	// A hold stops deletion, which the free-space guard lets go on (purges
	// and the storage budget pass it): placing one passes it too, so that
	// a full disk never lets the budget delete what an operator is trying
	// to keep. Its row (a reason of at most a kilobyte) takes next to
	// nothing of the headroom the floor keeps. DeleteLegalHold needs no such pass: releasing a hold only
	// deletes its row, and deletes never ask the guard.
	created, err := s.engine.Policies().CreateHold(diskspace.Exempt(ctx), h)
	if err != nil {
		return nil, s.policyStatus(ctx, m.GetName(), err)
	}
	s.log.Info("legal hold placed", "name", m.GetName())
	return &metadatav1.CreateLegalHoldResponse{LegalHold: holdMessage(created)}, nil
}

func (s *retentionService) GetLegalHold(ctx context.Context, req *metadatav1.GetLegalHoldRequest) (*metadatav1.GetLegalHoldResponse, error) {
	var v violations
	camera := v.checkHoldName("name", req.GetName())
	if err := v.err(); err != nil {
		return nil, err
	}
	h, err := s.engine.Policies().GetHold(ctx, camera)
	if err != nil {
		return nil, s.policyStatus(ctx, req.GetName(), err)
	}
	return &metadatav1.GetLegalHoldResponse{LegalHold: holdMessage(h)}, nil
}

func (s *retentionService) ListLegalHolds(ctx context.Context, req *metadatav1.ListLegalHoldsRequest) (*metadatav1.ListLegalHoldsResponse, error) {
	var v violations
	var err error
	resp := &metadatav1.ListLegalHoldsResponse{}
	resp.LegalHolds, resp.NextPageToken, err = readPage(ctx, s.log, &v, pageQuery{
		method:   metadatav1.RetentionService_ListLegalHolds_FullMethodName,
		pageSize: req.GetPageSize(), pageToken: req.GetPageToken(),
	}, func(limit int, resume *store.Cursor) ([]policy.Hold, *store.Cursor, error) {
		return s.engine.Policies().ListHolds(ctx, limit, resume)
	}, holdMessage)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *retentionService) UpdateLegalHold(ctx context.Context, req *metadatav1.UpdateLegalHoldRequest) (*metadatav1.UpdateLegalHoldResponse, error) {
	var v violations
	m := req.GetLegalHold()
	if m == nil {
		v.add("legal_hold", "required")
		return nil, v.err()
	}
	h := v.toHold(m)
	paths := req.GetUpdateMask().GetPaths()
	for i, path := range paths {
		if path != "reason" && (path != "*" || len(paths) > 1) {
			v.maskViolation(i, path, "name", "create_time", "update_time", "etag")
		}
	}
	v.checkETag("legal_hold.etag", m.GetEtag())
	if err := v.err(); err != nil {
		return nil, err
	}
	if len(paths) == 0 && h.Reason == "" {
		// An empty mask names the fields set (AIP-134): none, so nothing
		// changes; the hold is read, under the etag given.
		stored, err := s.engine.Policies().GetHold(ctx, h.CameraID)
		if err == nil && m.GetEtag() != "" && m.GetEtag() != stored.ETag {
			err = store.ErrConflict
		}
		if err != nil {
			return nil, s.policyStatus(ctx, m.GetName(), err)
		}
		return &metadatav1.UpdateLegalHoldResponse{LegalHold: holdMessage(stored)}, nil
	}
	// A hold's reason is part of the hold: changing it passes the
	// free-space guard as placing it does.
	updated, err := s.engine.Policies().UpdateHold(diskspace.Exempt(ctx), h, m.GetEtag())
	if err != nil {
		return nil, s.policyStatus(ctx, m.GetName(), err)
	}
	return &metadatav1.UpdateLegalHoldResponse{LegalHold: holdMessage(updated)}, nil
}

func (s *retentionService) DeleteLegalHold(ctx context.Context, req *metadatav1.DeleteLegalHoldRequest) (*metadatav1.DeleteLegalHoldResponse, error) {
	var v violations
	camera := v.checkHoldName("name", req.GetName())
	v.checkETag("etag", req.GetEtag())
	if err := v.err(); err != nil {
		return nil, err
	}
	if err := s.engine.Policies().DeleteHold(ctx, camera, req.GetEtag()); err != nil {
		return nil, s.policyStatus(ctx, req.GetName(), err)
	}
	s.log.Info("legal hold released", "name", req.GetName())
	return &metadatav1.DeleteLegalHoldResponse{}, nil
}
