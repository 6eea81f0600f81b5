package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// TestRetentionPolicyLifecycle: create, get, list, update by field mask and
// etag, delete, with the AIP codes for a name taken, missing or changed.
func TestRetentionPolicyLifecycle(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		ctx, rs := t.Context(), h.retention
		created, err := rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
			Name: "retentionPolicies/default", SingleRetentionDays: 30, PanoRetentionDays: 60}})
		requireOK(t, err, "create default")
		def := created.GetRetentionPolicy()
		if def.GetEtag() == "" || def.GetUpdateTime() == nil || def.GetSingleRetentionDays() != 30 || def.GetPanoRetentionDays() != 60 {
			t.Fatalf("created %v, want 30 and 60 days with an etag and an update time", def)
		}
		_, err = rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
			Name: "retentionPolicies/default", SingleRetentionDays: 7}})
		requireCode(t, err, codes.AlreadyExists)
		_, err = rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
			Name: "retentionPolicies/prefixes/acme-", PreStitchRetentionDays: 10}})
		requireOK(t, err, "create prefix")
		_, err = rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
			Name: "retentionPolicies/cameras/cam-1", SingleRetentionDays: 365}})
		requireOK(t, err, "create camera")

		_, err = rs.GetRetentionPolicy(ctx, &metadatav1.GetRetentionPolicyRequest{Name: "retentionPolicies/cameras/cam-2"})
		requireCode(t, err, codes.NotFound)
		got, err := rs.GetRetentionPolicy(ctx, &metadatav1.GetRetentionPolicyRequest{Name: "retentionPolicies/default"})
		requireOK(t, err, "get")
		if got.GetRetentionPolicy().GetEtag() != def.GetEtag() {
			t.Errorf("get: etag %q, want the create's %q", got.GetRetentionPolicy().GetEtag(), def.GetEtag())
		}

		// Only the masked field changes; pano keeps its 60 days.
		upd, err := rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{
			RetentionPolicy: &metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 14, PanoRetentionDays: 1, Etag: def.GetEtag()},
			UpdateMask:      mask("single_retention_days")})
		requireOK(t, err, "update")
		if p := upd.GetRetentionPolicy(); p.GetSingleRetentionDays() != 14 || p.GetPanoRetentionDays() != 60 || p.GetEtag() == def.GetEtag() {
			t.Errorf("updated %v, want single 14, pano 60 and a new etag", p)
		}
		// The first etag is stale now: ABORTED, and nothing changes.
		_, err = rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{
			RetentionPolicy: &metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 2, Etag: def.GetEtag()}})
		requireCode(t, err, codes.Aborted)
		_, err = rs.DeleteRetentionPolicy(ctx, &metadatav1.DeleteRetentionPolicyRequest{Name: "retentionPolicies/default", Etag: def.GetEtag()})
		requireCode(t, err, codes.Aborted)
		// A mask naming a field set to 0 clears it.
		upd, err = rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{
			RetentionPolicy: &metadatav1.RetentionPolicy{Name: "retentionPolicies/default", Etag: upd.GetRetentionPolicy().GetEtag()},
			UpdateMask:      mask("pano_retention_days")})
		requireOK(t, err, "clear pano")
		if p := upd.GetRetentionPolicy(); p.GetSingleRetentionDays() != 14 || p.GetPanoRetentionDays() != 0 {
			t.Errorf("after clearing pano: %v, want single 14, pano 0", p)
		}

		_, err = rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{
			RetentionPolicy: &metadatav1.RetentionPolicy{Name: "retentionPolicies/prefixes/site-", SingleRetentionDays: 3}})
		requireCode(t, err, codes.NotFound)
		upd, err = rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{
			RetentionPolicy: &metadatav1.RetentionPolicy{Name: "retentionPolicies/prefixes/site-", SingleRetentionDays: 3}, AllowMissing: true})
		requireOK(t, err, "update allow_missing")
		if upd.GetRetentionPolicy().GetSingleRetentionDays() != 3 {
			t.Errorf("allow_missing created %v, want single 3", upd.GetRetentionPolicy())
		}

		var names []string
		token := ""
		for {
			page, err := rs.ListRetentionPolicies(ctx, &metadatav1.ListRetentionPoliciesRequest{PageSize: 2, PageToken: token})
			requireOK(t, err, "list")
			for _, p := range page.GetRetentionPolicies() {
				names = append(names, p.GetName())
			}
			if token = page.GetNextPageToken(); token == "" {
				break
			}
		}
		want := []string{"retentionPolicies/cameras/cam-1", "retentionPolicies/default", "retentionPolicies/prefixes/acme-", "retentionPolicies/prefixes/site-"}
		if !slices.Equal(names, want) {
			t.Errorf("list: %q, want %q", names, want)
		}

		_, err = rs.DeleteRetentionPolicy(ctx, &metadatav1.DeleteRetentionPolicyRequest{Name: "retentionPolicies/cameras/cam-1"})
		requireOK(t, err, "delete")
		_, err = rs.DeleteRetentionPolicy(ctx, &metadatav1.DeleteRetentionPolicyRequest{Name: "retentionPolicies/cameras/cam-1"})
		requireCode(t, err, codes.NotFound)
	})
}

// TestLegalHoldLifecycle: a hold is placed once, read, listed, its reason
// updated under its etag, and released.
func TestLegalHoldLifecycle(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		ctx, rs := t.Context(), h.retention
		created, err := rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7", Reason: "case 1"}})
		requireOK(t, err, "create")
		hold := created.GetLegalHold()
		if hold.GetEtag() == "" || hold.GetCreateTime() == nil || hold.GetReason() != "case 1" {
			t.Fatalf("created %v", hold)
		}
		_, err = rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7"}})
		requireCode(t, err, codes.AlreadyExists)
		_, err = rs.GetLegalHold(ctx, &metadatav1.GetLegalHoldRequest{Name: "legalHolds/cam-8"})
		requireCode(t, err, codes.NotFound)

		upd, err := rs.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{
			LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7", Reason: "case 2", Etag: hold.GetEtag()}, UpdateMask: mask("reason")})
		requireOK(t, err, "update")
		if u := upd.GetLegalHold(); u.GetReason() != "case 2" || !u.GetCreateTime().AsTime().Equal(hold.GetCreateTime().AsTime()) || u.GetEtag() == hold.GetEtag() {
			t.Errorf("updated %v, want reason case 2, the same create time, a new etag", u)
		}
		_, err = rs.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{
			LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7", Reason: "case 3", Etag: hold.GetEtag()}})
		requireCode(t, err, codes.Aborted)
		// An empty mask names the fields set: none here, so the reason stays.
		same, err := rs.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7"}})
		requireOK(t, err, "update of nothing")
		if same.GetLegalHold().GetReason() != "case 2" {
			t.Errorf("an update of nothing left reason %q, want case 2", same.GetLegalHold().GetReason())
		}
		// A mask naming the reason with none given clears it.
		cleared, err := rs.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{
			LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7"}, UpdateMask: mask("reason")})
		requireOK(t, err, "clear the reason")
		if cleared.GetLegalHold().GetReason() != "" {
			t.Errorf("reason %q after clearing it", cleared.GetLegalHold().GetReason())
		}
		_, err = rs.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-8", Reason: "x"}})
		requireCode(t, err, codes.NotFound)

		list, err := rs.ListLegalHolds(ctx, &metadatav1.ListLegalHoldsRequest{})
		requireOK(t, err, "list")
		if len(list.GetLegalHolds()) != 1 || list.GetLegalHolds()[0].GetName() != "legalHolds/cam-7" {
			t.Errorf("list: %v, want cam-7's hold", list.GetLegalHolds())
		}
		_, err = rs.DeleteLegalHold(ctx, &metadatav1.DeleteLegalHoldRequest{Name: "legalHolds/cam-7", Etag: hold.GetEtag()})
		requireCode(t, err, codes.Aborted)
		_, err = rs.DeleteLegalHold(ctx, &metadatav1.DeleteLegalHoldRequest{Name: "legalHolds/cam-7"})
		requireOK(t, err, "delete")
		_, err = rs.DeleteLegalHold(ctx, &metadatav1.DeleteLegalHoldRequest{Name: "legalHolds/cam-7"})
		requireCode(t, err, codes.NotFound)
	})
}

// TestGetLegalHold: a placed hold reads back as it was placed, name,
// reason, times and etag; an update is what the next read returns; and the
// etag read is the one a conditional delete takes.
func TestGetLegalHold(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		ctx, rs := t.Context(), h.retention
		_, err := rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-6"}})
		requireOK(t, err, "create another hold")
		created, err := rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7", Reason: "case 1"}})
		requireOK(t, err, "create")
		placed := created.GetLegalHold()

		got, err := rs.GetLegalHold(ctx, &metadatav1.GetLegalHoldRequest{Name: "legalHolds/cam-7"})
		requireOK(t, err, "get")
		g := got.GetLegalHold()
		if g.GetName() != "legalHolds/cam-7" || g.GetReason() != "case 1" || g.GetEtag() == "" || g.GetEtag() != placed.GetEtag() ||
			g.GetCreateTime() == nil || !g.GetCreateTime().AsTime().Equal(placed.GetCreateTime().AsTime()) ||
			g.GetUpdateTime() == nil || !g.GetUpdateTime().AsTime().Equal(placed.GetUpdateTime().AsTime()) {
			t.Fatalf("get returned %v, want the hold as placed: %v", g, placed)
		}

		upd, err := rs.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{
			LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-7", Reason: "case 2", Etag: g.GetEtag()}, UpdateMask: mask("reason")})
		requireOK(t, err, "update with the etag read")
		got, err = rs.GetLegalHold(ctx, &metadatav1.GetLegalHoldRequest{Name: "legalHolds/cam-7"})
		requireOK(t, err, "get after the update")
		g, u := got.GetLegalHold(), upd.GetLegalHold()
		if g.GetReason() != "case 2" || g.GetEtag() != u.GetEtag() || g.GetEtag() == placed.GetEtag() ||
			!g.GetCreateTime().AsTime().Equal(placed.GetCreateTime().AsTime()) || !g.GetUpdateTime().AsTime().Equal(u.GetUpdateTime().AsTime()) {
			t.Fatalf("get after the update returned %v, want %v", g, u)
		}

		_, err = rs.DeleteLegalHold(ctx, &metadatav1.DeleteLegalHoldRequest{Name: "legalHolds/cam-7", Etag: g.GetEtag()})
		requireOK(t, err, "delete with the etag read")
		_, err = rs.GetLegalHold(ctx, &metadatav1.GetLegalHoldRequest{Name: "legalHolds/cam-7"})
		requireCode(t, err, codes.NotFound)
		_, err = rs.GetLegalHold(ctx, &metadatav1.GetLegalHoldRequest{Name: "legalHolds/cam-6"})
		requireOK(t, err, "the other hold stays")
	})
}

// TestListLegalHoldsPages: every page size walks every hold exactly once,
// in name order, the last page without a token; a page read again with its
// token is the same; a token is good only for the call that gave it.
func TestListLegalHoldsPages(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		ctx, rs := t.Context(), h.retention
		cameras := []string{"z", "cam-2", "a", "cam-10", "site-7", "cam-1", "cam-3"}
		for _, c := range cameras {
			_, err := rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/" + c, Reason: "case " + c}})
			requireOK(t, err, "create "+c)
		}
		want := []string{"legalHolds/a", "legalHolds/cam-1", "legalHolds/cam-10", "legalHolds/cam-2", "legalHolds/cam-3", "legalHolds/site-7", "legalHolds/z"}
		for _, size := range []int32{0, 1, 3, 6, 7, 8} {
			t.Run(fmt.Sprintf("page size %d", size), func(t *testing.T) {
				var names []string
				token := ""
				for pages := 1; ; pages++ {
					page, err := rs.ListLegalHolds(ctx, &metadatav1.ListLegalHoldsRequest{PageSize: size, PageToken: token})
					requireOK(t, err, "list")
					if size > 0 && int32(len(page.GetLegalHolds())) > size {
						t.Fatalf("page %d holds %d holds, more than the page size", pages, len(page.GetLegalHolds()))
					}
					for _, hold := range page.GetLegalHolds() {
						names = append(names, hold.GetName())
						if hold.GetReason() != "case "+strings.TrimPrefix(hold.GetName(), "legalHolds/") || hold.GetEtag() == "" {
							t.Errorf("listed %v, want its reason and an etag", hold)
						}
					}
					if token = page.GetNextPageToken(); token == "" {
						break
					}
					if pages > len(want) {
						t.Fatalf("still a next page after %d pages: %q", pages, names)
					}
				}
				if !slices.Equal(names, want) {
					t.Fatalf("pages of %d listed %q, want %q", size, names, want)
				}
			})
		}

		first, err := rs.ListLegalHolds(ctx, &metadatav1.ListLegalHoldsRequest{PageSize: 2})
		requireOK(t, err, "first page")
		var again [2]*metadatav1.ListLegalHoldsResponse
		for i := range again {
			again[i], err = rs.ListLegalHolds(ctx, &metadatav1.ListLegalHoldsRequest{PageSize: 2, PageToken: first.GetNextPageToken()})
			requireOK(t, err, "second page")
		}
		if !proto.Equal(again[0], again[1]) || len(again[0].GetLegalHolds()) != 2 || again[0].GetLegalHolds()[0].GetName() != want[2] {
			t.Fatalf("the second page read twice: %v and %v, want holds from %s both times", again[0], again[1], want[2])
		}
		for _, name := range []string{"retentionPolicies/default", "retentionPolicies/cameras/cam-1"} {
			_, err := rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{Name: name, SingleRetentionDays: 30}})
			requireOK(t, err, "create "+name)
		}
		policies, err := rs.ListRetentionPolicies(ctx, &metadatav1.ListRetentionPoliciesRequest{PageSize: 1})
		requireOK(t, err, "list policies")
		if policies.GetNextPageToken() == "" {
			t.Fatalf("a page of 1 of 2 policies has no next page token")
		}
		_, err = rs.ListLegalHolds(ctx, &metadatav1.ListLegalHoldsRequest{PageToken: policies.GetNextPageToken()})
		requireFieldViolation(t, err, "page_token")
		_, err = rs.ListLegalHolds(ctx, &metadatav1.ListLegalHoldsRequest{PageToken: "garbage"})
		requireFieldViolation(t, err, "page_token")
	})
}

// TestRetentionPolicyValidation: each bad request is INVALID_ARGUMENT
// naming its field, and writes nothing.
func TestRetentionPolicyValidation(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{runPurges: true, minRetentionDays: 7})
	ctx, rs := t.Context(), h.retention
	policy := func(p *metadatav1.RetentionPolicy) error {
		_, err := rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: p})
		return err
	}
	update := func(p *metadatav1.RetentionPolicy, paths ...string) error {
		_, err := rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{RetentionPolicy: p, UpdateMask: mask(paths...), AllowMissing: true})
		return err
	}
	hold := func(hl *metadatav1.LegalHold) error {
		_, err := rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: hl})
		return err
	}
	long := string(make([]byte, 300))
	for _, tc := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"no policy", func() error { return policy(nil) }, "retention_policy"},
		{"no name", func() error { return policy(&metadatav1.RetentionPolicy{SingleRetentionDays: 30}) }, "retention_policy.name"},
		{"unknown collection", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "policies/default", SingleRetentionDays: 30})
		}, "retention_policy.name"},
		{"empty camera", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/cameras/", SingleRetentionDays: 30})
		}, "retention_policy.name"},
		{"camera with a slash", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/cameras/a/b", SingleRetentionDays: 30})
		}, "retention_policy.name"},
		{"prefix too long", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/prefixes/" + long, SingleRetentionDays: 30})
		}, "retention_policy.name"},
		{"negative days", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", PanoRetentionDays: -1})
		}, "retention_policy.pano_retention_days"},
		{"below the floor", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 6})
		}, "retention_policy.single_retention_days"},
		{"above the ceiling", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", PreStitchRetentionDays: 100_001})
		}, "retention_policy.pre_stitch_retention_days"},
		{"update below the floor", func() error {
			return update(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 1}, "single_retention_days")
		}, "retention_policy.single_retention_days"},
		{"unknown mask path", func() error {
			return update(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 30}, "days")
		}, "update_mask.paths[0]"},
		{"immutable mask path", func() error {
			return update(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 30}, "single_retention_days", "name")
		}, "update_mask.paths[1]"},
		{"star with another path", func() error {
			return update(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 30}, "single_retention_days", "*")
		}, "update_mask.paths[1]"},
		{"tier below the floor", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleThinning: []*metadatav1.ThinningTier{
				{AfterDays: 3, KeepOnePer: durationpb.New(time.Hour)}}})
		}, "retention_policy.single_thinning[0].after_days"},
		{"tier without an interval", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", PanoThinning: []*metadatav1.ThinningTier{
				{AfterDays: 30}}})
		}, "retention_policy.pano_thinning[0].keep_one_per"},
		{"tier interval not dividing a day", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", PanoThinning: []*metadatav1.ThinningTier{
				{AfterDays: 30, KeepOnePer: durationpb.New(7 * time.Minute)}}})
		}, "retention_policy.pano_thinning[0].keep_one_per"},
		{"tiers overlapping", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", PreStitchThinning: []*metadatav1.ThinningTier{
				{AfterDays: 30, KeepOnePer: durationpb.New(time.Hour), UntilDays: 90},
				{AfterDays: 60, KeepOnePer: durationpb.New(24 * time.Hour)}}})
		}, "retention_policy.pre_stitch_thinning[1].after_days"},
		{"tier past the days", func() error {
			return policy(&metadatav1.RetentionPolicy{Name: "retentionPolicies/default", SingleRetentionDays: 60, SingleThinning: []*metadatav1.ThinningTier{
				{AfterDays: 30, KeepOnePer: durationpb.New(time.Hour), UntilDays: 90}}})
		}, "retention_policy.single_thinning[0].until_days"},
		{"update tiers past the days", func() error {
			// The stored days (set first) and the update's tiers disagree.
			if err := update(&metadatav1.RetentionPolicy{Name: "retentionPolicies/cameras/cam-9", SingleRetentionDays: 60}, "single_retention_days"); err != nil {
				return err
			}
			defer rs.DeleteRetentionPolicy(ctx, &metadatav1.DeleteRetentionPolicyRequest{Name: "retentionPolicies/cameras/cam-9"})
			return update(&metadatav1.RetentionPolicy{Name: "retentionPolicies/cameras/cam-9", SingleThinning: []*metadatav1.ThinningTier{
				{AfterDays: 30, KeepOnePer: durationpb.New(time.Hour), UntilDays: 90}}}, "single_thinning")
		}, "retention_policy.single_thinning[0].until_days"},
		{"get a bad name", func() error {
			_, err := rs.GetRetentionPolicy(ctx, &metadatav1.GetRetentionPolicyRequest{Name: "retentionPolicies/defaults"})
			return err
		}, "name"},
		{"delete a bad name", func() error {
			_, err := rs.DeleteRetentionPolicy(ctx, &metadatav1.DeleteRetentionPolicyRequest{})
			return err
		}, "name"},
		{"list a bad page size", func() error {
			_, err := rs.ListRetentionPolicies(ctx, &metadatav1.ListRetentionPoliciesRequest{PageSize: -1})
			return err
		}, "page_size"},
		{"hold without a name", func() error { return hold(&metadatav1.LegalHold{}) }, "legal_hold.name"},
		{"hold of a policy name", func() error { return hold(&metadatav1.LegalHold{Name: "retentionPolicies/cameras/cam-1"}) }, "legal_hold.name"},
		{"hold reason too long", func() error {
			return hold(&metadatav1.LegalHold{Name: "legalHolds/cam-1", Reason: string(make([]byte, 1025))})
		}, "legal_hold.reason"},
		{"hold mask path", func() error {
			_, err := rs.UpdateLegalHold(ctx, &metadatav1.UpdateLegalHoldRequest{
				LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-1"}, UpdateMask: mask("create_time")})
			return err
		}, "update_mask.paths[0]"},
		{"purge with policies and days", func() error {
			_, err := rs.StartPurge(ctx, &metadatav1.StartPurgeRequest{UsePolicies: true,
				Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}})
			return err
		}, "use_policies"},
		{"purge with neither", func() error {
			_, err := rs.StartPurge(ctx, &metadatav1.StartPurgeRequest{})
			return err
		}, "cutoff"},
	} {
		t.Run(tc.name, func(t *testing.T) { requireFieldViolation(t, tc.call(), tc.field) })
	}
	policies, err := rs.ListRetentionPolicies(ctx, &metadatav1.ListRetentionPoliciesRequest{})
	requireOK(t, err, "list")
	holds, err := rs.ListLegalHolds(ctx, &metadatav1.ListLegalHoldsRequest{})
	requireOK(t, err, "list holds")
	if len(policies.GetRetentionPolicies())+len(holds.GetLegalHolds()) != 0 {
		t.Errorf("refused requests wrote %v and %v", policies.GetRetentionPolicies(), holds.GetLegalHolds())
	}
	// With no policy, a purge with policies has nothing to apply.
	_, err = rs.StartPurge(ctx, &metadatav1.StartPurgeRequest{UsePolicies: true})
	requireCode(t, err, codes.FailedPrecondition)
}

// TestMalformedTiersOnBothRPCs: a tier the store would refuse (an interval
// of 0s, negative or past any day; days negative or past the ceiling) is
// INVALID_ARGUMENT naming its field on CreateRetentionPolicy and on
// UpdateRetentionPolicy alike, and nothing is written. A "0s" was INTERNAL
// on create, refused by the store rather than the edge.
func TestMalformedTiersOnBothRPCs(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{runPurges: true, minRetentionDays: 7})
	ctx, rs := t.Context(), h.retention
	const name = "retentionPolicies/cameras/cam-1"
	for _, tc := range []struct {
		name  string
		tier  *metadatav1.ThinningTier
		field string
	}{
		{"zero interval", &metadatav1.ThinningTier{AfterDays: 30, KeepOnePer: durationpb.New(0)}, "keep_one_per"},
		{"negative interval", &metadatav1.ThinningTier{AfterDays: 30, KeepOnePer: durationpb.New(-time.Hour)}, "keep_one_per"},
		{"interval under a minute", &metadatav1.ThinningTier{AfterDays: 30, KeepOnePer: durationpb.New(time.Nanosecond)}, "keep_one_per"},
		{"interval of 10,000 years", &metadatav1.ThinningTier{AfterDays: 30, KeepOnePer: &durationpb.Duration{Seconds: 315_576_000_000}}, "keep_one_per"},
		{"interval past a duration's range", &metadatav1.ThinningTier{AfterDays: 30, KeepOnePer: &durationpb.Duration{Seconds: 1 << 62}}, "keep_one_per"},
		{"negative after_days", &metadatav1.ThinningTier{AfterDays: -30, KeepOnePer: durationpb.New(time.Hour)}, "after_days"},
		{"after_days past the ceiling", &metadatav1.ThinningTier{AfterDays: 1 << 30, KeepOnePer: durationpb.New(time.Hour)}, "after_days"},
		{"negative until_days", &metadatav1.ThinningTier{AfterDays: 30, KeepOnePer: durationpb.New(time.Hour), UntilDays: -1}, "until_days"},
		{"until_days past the ceiling", &metadatav1.ThinningTier{AfterDays: 30, KeepOnePer: durationpb.New(time.Hour), UntilDays: 1 << 30}, "until_days"},
	} {
		field := "retention_policy.single_thinning[0]." + tc.field
		policy := &metadatav1.RetentionPolicy{Name: name, SingleThinning: []*metadatav1.ThinningTier{tc.tier}}
		t.Run(tc.name+"/create", func(t *testing.T) {
			_, err := rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: policy})
			requireFieldViolation(t, err, field)
		})
		t.Run(tc.name+"/update", func(t *testing.T) {
			_, err := rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{RetentionPolicy: policy,
				UpdateMask: mask("single_thinning"), AllowMissing: true})
			requireFieldViolation(t, err, field)
		})
	}
	policies, err := rs.ListRetentionPolicies(ctx, &metadatav1.ListRetentionPoliciesRequest{})
	requireOK(t, err, "list")
	if len(policies.GetRetentionPolicies()) != 0 {
		t.Errorf("refused requests wrote %v", policies.GetRetentionPolicies())
	}
}

// TestPurgeWithPoliciesOverGRPC: the default retires a day-old camera's
// images, a camera's own policy and a legal hold keep theirs, and types no
// policy sets are not purged.
func TestPurgeWithPoliciesOverGRPC(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachBackend(t, func(t *testing.T, b backend) {
		now := minute(0).Add(policy.Days(2))
		h := startServerOpts(t, b.open(t), serverOpts{runPurges: true, now: func() time.Time { return now }})
		ctx, rs := t.Context(), h.retention
		seedMinutes(t, h, 3)
		for _, p := range []*metadatav1.RetentionPolicy{
			{Name: "retentionPolicies/default", SingleRetentionDays: 1},
			{Name: "retentionPolicies/cameras/cam-1", SingleRetentionDays: 3},
		} {
			_, err := rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: p})
			requireOK(t, err, "create policy")
		}
		_, err := rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-2"}})
		requireOK(t, err, "create hold")

		start, err := rs.StartPurge(ctx, &metadatav1.StartPurgeRequest{UsePolicies: true})
		requireOK(t, err, "StartPurge")
		snaps := watch(t, h, start.GetJob().GetJobId())
		j := snaps[len(snaps)-1]
		if j.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || !j.GetUsePolicies() {
			t.Fatalf("job %v", j)
		}
		if types := j.GetImageTypes(); len(types) != 1 || types[0] != metadatav1.ImageType_IMAGE_TYPE_SINGLE {
			t.Errorf("image types %v, want single only: no policy sets the others", types)
		}
		if !j.GetCutoffTime().AsTime().Equal(now.Add(-policy.Days(1))) {
			t.Errorf("cutoff %v, want the default's, the newest in force", j.GetCutoffTime().AsTime())
		}
		if j.GetDevicesDone() != 1 || j.GetMetadataRowsDeleted() != 4 || j.GetIndexRowsDeleted() != 4 {
			t.Errorf("counts %v, want cam-0's 4 rows of each table", j)
		}
		for camera, want := range map[string]int{"cam-0": 0, "cam-1": 4, "cam-2": 4} {
			if got := singleCount(t, h, camera); got != want {
				t.Errorf("%s keeps %d single images, want %d", camera, got, want)
			}
		}
	})
}

// TestThinningOverGRPC: a policy's tiers round-trip and change by their
// mask paths, and a purge with policies keeps one image per interval of
// them, counted as thinned, on both backends.
func TestThinningOverGRPC(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachBackend(t, func(t *testing.T, b backend) {
		now := minute(0).Add(policy.Days(3))
		h := startServerOpts(t, b.open(t), serverOpts{runPurges: true, now: func() time.Time { return now }})
		ctx, rs := t.Context(), h.retention
		tiers := []*metadatav1.ThinningTier{{AfterDays: 1, KeepOnePer: durationpb.New(time.Hour)}}
		_, err := rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
			Name: "retentionPolicies/default", SingleThinning: tiers}})
		requireOK(t, err, "create a policy with tiers")
		got, err := rs.GetRetentionPolicy(ctx, &metadatav1.GetRetentionPolicyRequest{Name: "retentionPolicies/default"})
		requireOK(t, err, "get")
		if p := got.GetRetentionPolicy(); len(p.GetSingleThinning()) != 1 || !proto.Equal(p.GetSingleThinning()[0], tiers[0]) || p.GetSingleRetentionDays() != 0 {
			t.Fatalf("stored %v, want the tier and no days", p)
		}
		// The pano tiers change by their path alone; the single ones stay.
		upd, err := rs.UpdateRetentionPolicy(ctx, &metadatav1.UpdateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
			Name: "retentionPolicies/default", PanoThinning: tiers}, UpdateMask: mask("pano_thinning")})
		requireOK(t, err, "update pano_thinning")
		if p := upd.GetRetentionPolicy(); len(p.GetSingleThinning()) != 1 || len(p.GetPanoThinning()) != 1 {
			t.Fatalf("updated %v, want single and pano tiers", p)
		}
		seedMinutes(t, h, 2) // minutes 0-3 of one hour, two days old
		start, err := rs.StartPurge(ctx, &metadatav1.StartPurgeRequest{UsePolicies: true})
		requireOK(t, err, "StartPurge")
		snaps := watch(t, h, start.GetJob().GetJobId())
		j := snaps[len(snaps)-1]
		if j.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED {
			t.Fatalf("job %v", j)
		}
		// Of each camera's hour, single and pano keep their first image.
		if j.GetMetadataRowsDeleted() != 12 || j.GetMetadataRowsThinned() != 12 || j.GetIndexRowsDeleted() != 12 {
			t.Errorf("counts %v, want 3 of 4 rows thinned per camera and type (single, pano)", j)
		}
		for _, tc := range j.GetTypeCounts() {
			if tc.GetMetadataRowsThinned() != 6 {
				t.Errorf("%s: %d rows thinned, want 6", tc.GetImageType(), tc.GetMetadataRowsThinned())
			}
		}
		resp, err := h.single.ListSingleImageMetadata(ctx, &metadatav1.ListSingleImageMetadataRequest{CameraId: "cam-0"})
		requireOK(t, err, "list")
		if m := resp.GetMetadata(); len(m) != 1 || !m[0].GetCapturedAt().AsTime().Equal(minute(0)) {
			t.Errorf("cam-0 keeps %v, want its image of minute 0 alone", m)
		}
	})
}

// TestWatchDeletedImagesOverGRPC: the stream names each image a purge with
// policies deleted, with its blob URI, and none a hold kept; a resume token
// goes on after them; a bad token is INVALID_ARGUMENT; once the purge's job
// is retired its token is OUT_OF_RANGE; a server without the outbox says
// how to get one. On both backends: Azure's outbox is its own design.
func TestWatchDeletedImagesOverGRPC(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachBackend(t, testWatchDeletedImages)
}

func testWatchDeletedImages(t *testing.T, b backend) {
	now := minute(0).Add(policy.Days(2))
	tables := b.open(t)
	h := startServerOpts(t, tables, serverOpts{runPurges: true, outbox: true, now: func() time.Time { return now }})
	ctx, rs := t.Context(), h.retention
	seedMinutes(t, h, 2)
	_, err := rs.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
		Name: "retentionPolicies/default", SingleRetentionDays: 1}})
	requireOK(t, err, "create policy")
	_, err = rs.CreateLegalHold(ctx, &metadatav1.CreateLegalHoldRequest{LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-1"}})
	requireOK(t, err, "create hold")
	start, err := rs.StartPurge(ctx, &metadatav1.StartPurgeRequest{UsePolicies: true})
	requireOK(t, err, "StartPurge")
	watch(t, h, start.GetJob().GetJobId())

	receive := func(token string, want int) (string, []*metadatav1.DeletedImage) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, watchPatience)
		defer cancel()
		stream, err := rs.WatchDeletedImages(wctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: token})
		requireOK(t, err, "WatchDeletedImages")
		var got []*metadatav1.DeletedImage
		for len(got) < want {
			resp, err := stream.Recv()
			requireOK(t, err, "receive deleted images")
			got, token = append(got, resp.GetImages()...), resp.GetResumeToken()
		}
		return token, got
	}
	token, got := receive("", 4)
	for i, d := range got {
		at := minute(3 - i) // a camera's rows go newest first
		if d.GetCameraId() != "cam-0" || d.GetImageType() != metadatav1.ImageType_IMAGE_TYPE_SINGLE || !d.GetCapturedAt().AsTime().Equal(at) ||
			d.GetPurgeJobId() != start.GetJob().GetJobId() {
			t.Errorf("deleted image %d: %v, want cam-0's single image of %s by the purge", i, d, at)
		}
	}
	if len(got) != 4 {
		t.Fatalf("%d deleted images, want cam-0's 4 (cam-1 is held)", len(got))
	}
	// Nothing after the token until another purge deletes something.
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	stream, err := rs.WatchDeletedImages(wctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: token})
	requireOK(t, err, "WatchDeletedImages")
	if resp, err := stream.Recv(); err == nil {
		t.Errorf("after the last token: %v, want nothing", resp)
	} else {
		requireCode(t, err, codes.DeadlineExceeded)
	}
	bad, err := rs.WatchDeletedImages(ctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: "x"})
	requireOK(t, err, "open a stream with a bad token")
	_, err = bad.Recv()
	requireFieldViolation(t, err, "resume_token")

	// A server a month on retires the job, and its outbox with it, as its
	// engine starts.
	later := now.Add(retention.DefaultJobRetention + policy.Days(1))
	next := startServerOpts(t, tables, serverOpts{runPurges: true, outbox: true, now: func() time.Time { return later }})
	// The token of a position within the retired deletions, as a client
	// that read the first of them holds: the embedded outbox's first
	// position, the start of Azure's first seal.
	first := map[string]string{"pebble": "1", "azure": "1."}[b.name]
	deadline := time.Now().Add(watchPatience)
	for {
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		old, err := next.retention.WatchDeletedImages(rctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: first})
		requireOK(t, err, "open a stream with a retired token")
		_, err = old.Recv()
		cancel()
		if status.Code(err) == codes.OutOfRange {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a token of a retired job: %v, want OUT_OF_RANGE", err)
		}
	}

	plain := startServerOpts(t, openMemPebble(t), serverOpts{})
	off, err := plain.retention.WatchDeletedImages(ctx, &metadatav1.WatchDeletedImagesRequest{})
	requireOK(t, err, "open a stream without the outbox")
	_, err = off.Recv()
	requireCode(t, err, codes.FailedPrecondition)
}
