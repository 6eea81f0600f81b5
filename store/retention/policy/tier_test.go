package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

func TestCheckTiers(t *testing.T) {
	m := time.Minute
	for _, c := range []struct {
		name  string
		days  int
		tiers []Tier
		want  []TierProblem // Problem compared by presence only
	}{
		{"two tiers up to the days", 730, []Tier{{30, 15 * m, 365}, {365, 24 * time.Hour, 0}}, nil},
		{"open-ended without days", 0, []Tier{{30, 15 * m, 0}}, nil},
		{"after below the floor", 0, []Tier{{0, 15 * m, 0}}, []TierProblem{{Tier: 0, Field: "after_days"}}},
		{"after past MaxDays", 0, []Tier{{MaxDays + 1, 15 * m, 0}}, []TierProblem{{Tier: 0, Field: "after_days"}}},
		{"after at the days", 30, []Tier{{30, 15 * m, 0}}, []TierProblem{{Tier: 0, Field: "after_days"}}},
		{"overlapping tiers", 0, []Tier{{30, 15 * m, 100}, {90, time.Hour, 0}}, []TierProblem{{Tier: 1, Field: "after_days"}}},
		{"an open tier before another", 0, []Tier{{30, 15 * m, 0}, {90, time.Hour, 0}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"until before after", 0, []Tier{{30, 15 * m, 20}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"until negative", 0, []Tier{{30, 15 * m, -1}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"until past the days", 100, []Tier{{30, 15 * m, 200}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"until past MaxDays", 0, []Tier{{30, 15 * m, MaxDays + 1}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"an interval of seconds", 0, []Tier{{30, 90 * time.Second, 0}}, []TierProblem{{Tier: 0, Field: "keep_one_per"}}},
		{"an interval not dividing a day", 0, []Tier{{30, 7 * m, 0}}, []TierProblem{{Tier: 0, Field: "keep_one_per"}}},
		{"an interval over a day", 0, []Tier{{30, 48 * time.Hour, 0}}, []TierProblem{{Tier: 0, Field: "keep_one_per"}}},
		{"two fields of one tier", 0, []Tier{{0, 7 * m, 0}}, []TierProblem{{Tier: 0, Field: "after_days"}, {Tier: 0, Field: "keep_one_per"}}},
		{"too many", 0, slices.Repeat([]Tier{{1, m, 2}}, MaxTiers+1), []TierProblem{{Tier: -1}}},
		{"as many as allowed", 0, tierRun(MaxTiers), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CheckTiers(c.days, c.tiers, 1)
			if len(got) != len(c.want) {
				t.Fatalf("CheckTiers = %+v, want problems at %+v", got, c.want)
			}
			for i := range got {
				if got[i].Tier != c.want[i].Tier || got[i].Field != c.want[i].Field || got[i].Problem == "" {
					t.Errorf("problem %d = %+v, want at %+v", i, got[i], c.want[i])
				}
			}
		})
	}
	if got := CheckTiers(0, []Tier{{3, time.Hour, 0}}, 7); len(got) != 1 || got[0].Field != "after_days" {
		t.Errorf("a tier below the server's floor: %+v, want an after_days problem", got)
	}
}

// tierRun is n tiers, each starting where the one before ends.
func tierRun(n int) []Tier {
	out := make([]Tier, n)
	for i := range out {
		out[i] = Tier{AfterDays: i + 1, KeepOnePer: time.Minute, UntilDays: i + 2}
	}
	return out
}

func TestValidInterval(t *testing.T) {
	for _, c := range []struct {
		every time.Duration
		want  bool
	}{
		{time.Minute, true}, {15 * time.Minute, true}, {24 * time.Hour, true}, {8 * time.Hour, true},
		{0, false}, {30 * time.Second, false}, {90 * time.Second, false}, {7 * time.Minute, false},
		{48 * time.Hour, false}, {-time.Hour, false},
	} {
		if got := ValidInterval(c.every); got != c.want {
			t.Errorf("ValidInterval(%s) = %t, want %t", c.every, got, c.want)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	ok := Policy{Days: map[images.Kind]int{images.Pano: 730}, Tiers: map[images.Kind][]Tier{images.Pano: {{30, 15 * time.Minute, 365}}}}
	if err := ok.Check(); err != nil {
		t.Errorf("a sound policy: %v", err)
	}
	bad := Policy{Days: map[images.Kind]int{images.Pano: 30}, Tiers: map[images.Kind][]Tier{images.Pano: {{30, 15 * time.Minute, 0}}}}
	err := bad.Check()
	perr, isPolicyError := err.(*Error)
	if !isPolicyError || perr.Kind != images.Pano || perr.Tier != 0 || perr.Field != "after_days" {
		t.Fatalf("tiers past the days: %v, want a *Error on pano tier 0 after_days", err)
	}
	if perr.Error() == "" {
		t.Error("the error says nothing")
	}
}
