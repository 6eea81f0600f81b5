package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

func days(scope Scope, target string, single int, tiers ...Tier) Policy {
	p := Policy{Scope: scope, Target: target, Days: map[images.Kind]int{images.Single: single}, Tiers: map[images.Kind][]Tier{}}
	if len(tiers) > 0 {
		p.Tiers[images.Single] = tiers
	}
	return p
}

func TestRulesFor(t *testing.T) {
	thin := Tier{AfterDays: 10, KeepOnePer: time.Hour}
	rules := NewRules(images.Single)
	for _, p := range []Policy{
		days(ScopeDefault, "", 30),
		days(ScopePrefix, "site-", 60),
		days(ScopePrefix, "site-a-", 90),
		days(ScopePrefix, "site-b-", 0, thin),                                        // tiers alone set the kind
		days(ScopePrefix, "site-c-", 0),                                              // sets nothing: passed by
		{Scope: ScopePrefix, Target: "x", Days: map[images.Kind]int{images.Pano: 5}}, // another kind's
	} {
		rules.Add(p)
	}
	if got := rules.Prefixes(); got != 3 {
		t.Errorf("Prefixes = %d, want the 3 that set the kind", got)
	}
	own := days(ScopeCamera, "site-a-1", 7)
	silent := days(ScopeCamera, "site-a-2", 0)
	for _, c := range []struct {
		name   string
		camera string
		own    *Policy
		want   Rule
	}{
		{"its own policy beats any prefix", "site-a-1", &own, Rule{Days: 7}},
		{"an own policy silent on the kind falls through", "site-a-2", &silent, Rule{Days: 90}},
		{"the longest prefix", "site-a-3", nil, Rule{Days: 90}},
		{"a shorter prefix", "site-z-1", nil, Rule{Days: 60}},
		{"tiers without days", "site-b-1", nil, Rule{Tiers: []Tier{thin}}},
		{"a prefix that sets nothing is passed by", "site-c-1", nil, Rule{Days: 60}},
		{"the default", "other", nil, Rule{Days: 30}},
		{"another kind's prefix is not this kind's", "x1", nil, Rule{Days: 30}},
		{"a camera shorter than the prefixes", "s", nil, Rule{Days: 30}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := rules.For(c.camera, c.own); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("For(%q) = %+v, want %+v", c.camera, got, c.want)
			}
		})
	}
	if got := NewRules(images.Single).For("cam", nil); got.Days != 0 || len(got.Tiers) != 0 {
		t.Errorf("without policies: %+v, want the kind kept", got)
	}
}

func TestRuleAt(t *testing.T) {
	now := time.Date(2026, 6, 1, 10, 7, 42, 0, time.UTC)
	boundary, thin := Rule{Days: 30}.At(now)
	if want := time.Date(2026, 5, 2, 10, 7, 0, 0, time.UTC); !boundary.Equal(want) || thin != nil {
		t.Errorf("30 days: %s, %v; want %s and no windows", boundary, thin, want)
	}
	boundary, thin = Rule{Tiers: []Tier{{AfterDays: 10, KeepOnePer: time.Hour}}}.At(now)
	if !boundary.IsZero() || len(thin) != 1 {
		t.Errorf("tiers alone: %s, %v; want no boundary and one window", boundary, thin)
	}
}

func TestResolve(t *testing.T) {
	boundary := time.Date(2026, 5, 2, 10, 7, 0, 0, time.UTC)
	thin := []Window{{From: boundary, To: boundary.Add(Days(20)), Every: time.Hour}}
	older, newer := boundary.Add(-time.Hour), boundary.Add(Days(25))
	for _, c := range []struct {
		name     string
		boundary time.Time
		thin     []Window
		oldest   time.Time
		held     bool
		want     CameraRule
	}{
		{"rows before the boundary", boundary, nil, older, false, CameraRule{Boundary: boundary, Purge: true}},
		{"no row before the boundary", boundary, nil, newer, false, CameraRule{Boundary: boundary}},
		{"kept by age", time.Time{}, nil, older, false, CameraRule{}},
		{"rows in the windows", time.Time{}, thin, older, false, CameraRule{Thin: thin}},
		{"no row in the windows", time.Time{}, thin, newer, false, CameraRule{}},
		{"held, with rows to purge and thin", boundary, thin, older, true, CameraRule{Boundary: boundary, Held: true}},
		{"held, with rows to thin", time.Time{}, thin, older, true, CameraRule{Held: true}},
		{"held, with nothing to do", boundary, thin, newer, true, CameraRule{Boundary: boundary}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Resolve(c.boundary, c.thin, c.oldest, c.held); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("Resolve = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestReaches(t *testing.T) {
	r := Reaches{}
	r.Add(days(ScopeDefault, "", 30))
	r.Add(days(ScopePrefix, "a", 0, Tier{AfterDays: 12, KeepOnePer: time.Hour, UntilDays: 20}, Tier{AfterDays: 20, KeepOnePer: 24 * time.Hour}))
	r.Add(days(ScopeCamera, "b", 400, Tier{AfterDays: 7, KeepOnePer: time.Hour}))
	r.Add(Policy{Scope: ScopeCamera, Target: "c", Days: map[images.Kind]int{images.Pano: 90}})
	want := Reaches{images.Single: {Days: 30, ThinAfter: 7}, images.Pano: {Days: 90}}
	if fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("Reaches = %+v, want %+v", r, want)
	}
}

func TestHoldSet(t *testing.T) {
	h := HoldSet{}
	h.Add("cam-1")
	if !h.Has("cam-1") || h.Has("cam-2") || h.Has("cam") {
		t.Errorf("HoldSet %v", h)
	}
	var none HoldSet
	if none.Has("cam-1") {
		t.Error("a nil set holds a camera")
	}
}
