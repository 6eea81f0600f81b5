package retention

import (
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
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
		{"after at the days", 30, []Tier{{30, 15 * m, 0}}, []TierProblem{{Tier: 0, Field: "after_days"}}},
		{"overlapping tiers", 0, []Tier{{30, 15 * m, 100}, {90, time.Hour, 0}}, []TierProblem{{Tier: 1, Field: "after_days"}}},
		{"an open tier before another", 0, []Tier{{30, 15 * m, 0}, {90, time.Hour, 0}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"until before after", 0, []Tier{{30, 15 * m, 20}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"until past the days", 100, []Tier{{30, 15 * m, 200}}, []TierProblem{{Tier: 0, Field: "until_days"}}},
		{"an interval of seconds", 0, []Tier{{30, 90 * time.Second, 0}}, []TierProblem{{Tier: 0, Field: "keep_one_per"}}},
		{"an interval not dividing a day", 0, []Tier{{30, 7 * m, 0}}, []TierProblem{{Tier: 0, Field: "keep_one_per"}}},
		{"an interval over a day", 0, []Tier{{30, 48 * time.Hour, 0}}, []TierProblem{{Tier: 0, Field: "keep_one_per"}}},
		{"too many", 0, slices.Repeat([]Tier{{1, m, 2}}, MaxTiers+1), []TierProblem{{Tier: -1}}},
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

func TestTiersRoundTrip(t *testing.T) {
	tiers := []Tier{{30, 15 * time.Minute, 365}, {365, 24 * time.Hour, 0}}
	s := encodeTiers(tiers)
	if s != "30:15:365,365:1440:0" {
		t.Errorf("encoded as %q", s)
	}
	got, err := decodeTiers(s)
	if err != nil || !slices.Equal(got, tiers) {
		t.Errorf("decodeTiers(%q) = %v, %v; want %v", s, got, err, tiers)
	}
	for _, bad := range []string{"30:15", "a:15:0", "30:15:0,"} {
		if _, err := decodeTiers(bad); err == nil {
			t.Errorf("decodeTiers(%q) read", bad)
		}
	}
}

func TestThinWindows(t *testing.T) {
	now := time.Date(2026, 6, 1, 10, 7, 0, 0, time.UTC)
	ws := thinWindows(now, 730, []Tier{{30, 15 * time.Minute, 365}, {365, 24 * time.Hour, 0}})
	want := []thinWindow{
		// [ceil(now-365d, 15m), floor(now-30d, 15m))
		{From: time.Date(2025, 6, 1, 10, 15, 0, 0, time.UTC), To: time.Date(2026, 5, 2, 10, 0, 0, 0, time.UTC), Every: 15 * time.Minute},
		// up to the days: [ceil(now-730d, 24h), floor(now-365d, 24h))
		{From: time.Date(2024, 6, 2, 0, 0, 0, 0, time.UTC), To: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), Every: 24 * time.Hour},
	}
	if !slices.Equal(ws, want) {
		t.Errorf("thinWindows = %+v, want %+v", ws, want)
	}
	if ws := thinWindows(now, 0, []Tier{{30, time.Hour, 0}}); len(ws) != 1 || !ws[0].From.IsZero() {
		t.Errorf("an open tier without days: %+v, want one window from the start", ws)
	}
	if got := newestThinned(want); !got.Equal(want[0].To) {
		t.Errorf("newestThinned = %s, want %s", got, want[0].To)
	}
}

func TestThinSpans(t *testing.T) {
	day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	tally := &store.DayTally{PartitionKey: "cam", Day: day, Minutes: []store.MinuteRows{
		{Minute: 0, Rows: 1}, {Minute: 5, Rows: 1}, // interval 0: two rows
		{Minute: 16, Rows: 3}, // interval 1: three rows in one minute
		{Minute: 31, Rows: 1}, // interval 2: one row, kept as is
		{Minute: 50, Rows: 2}, // interval 3: two rows
		{Minute: 70, Rows: 4}, // interval 4, past the window
	}}
	w := []thinWindow{{To: day.Add(60 * time.Minute), Every: 15 * time.Minute}}
	got := thinSpans(tally, w)
	want := []thinSpan{
		{from: day, to: day.Add(30 * time.Minute), every: 15 * time.Minute, extra: 1 + 2},
		{from: day.Add(45 * time.Minute), to: day.Add(60 * time.Minute), every: 15 * time.Minute, extra: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("thinSpans = %+v, want %+v", got, want)
	}
	if got := thinSpans(tally, []thinWindow{{From: day.Add(24 * time.Hour), To: day.Add(48 * time.Hour), Every: time.Hour}}); len(got) != 0 {
		t.Errorf("a window on another day: %+v", got)
	}
}
