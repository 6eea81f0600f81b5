package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

func TestWindows(t *testing.T) {
	now := time.Date(2026, 6, 1, 10, 7, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		days  int
		tiers []Tier
		want  []Window
	}{
		{"two tiers up to the days", 730, []Tier{{30, 15 * time.Minute, 365}, {365, 24 * time.Hour, 0}}, []Window{
			// [ceil(now-365d, 15m), floor(now-30d, 15m))
			{From: time.Date(2025, 6, 1, 10, 15, 0, 0, time.UTC), To: time.Date(2026, 5, 2, 10, 0, 0, 0, time.UTC), Every: 15 * time.Minute},
			// up to the days: [ceil(now-730d, 24h), floor(now-365d, 24h))
			{From: time.Date(2024, 6, 2, 0, 0, 0, 0, time.UTC), To: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), Every: 24 * time.Hour},
		}},
		{"an open tier without days, from the start", 0, []Tier{{30, time.Hour, 0}}, []Window{
			{To: time.Date(2026, 5, 2, 10, 0, 0, 0, time.UTC), Every: time.Hour},
		}},
		{"a tier too short for one whole interval", 0, []Tier{{1, 24 * time.Hour, 2}}, nil},
		{"a boundary on an interval edge stays", 0, []Tier{{1, time.Minute, 2}}, []Window{
			{From: now.Add(-Days(2)), To: now.Add(-Days(1)), Every: time.Minute},
		}},
		{"no tiers", 30, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Windows(now, c.days, c.tiers); !slices.Equal(got, c.want) {
				t.Errorf("Windows = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestNewestThinned(t *testing.T) {
	a, b := time.Date(2026, 5, 2, 10, 0, 0, 0, time.UTC), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	if got := NewestThinned([]Window{{To: b}, {To: a}}); !got.Equal(a) {
		t.Errorf("NewestThinned = %s, want %s", got, a)
	}
	if got := NewestThinned(nil); !got.IsZero() {
		t.Errorf("NewestThinned(nil) = %s, want zero", got)
	}
}

func TestSpans(t *testing.T) {
	day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	tally := &store.DayTally{PartitionKey: "cam", Day: day, Minutes: []store.MinuteRows{
		{Minute: 0, Rows: 1}, {Minute: 5, Rows: 1}, // interval 0: two rows
		{Minute: 16, Rows: 3}, // interval 1: three rows in one minute
		{Minute: 31, Rows: 1}, // interval 2: one row, kept as is
		{Minute: 50, Rows: 2}, // interval 3: two rows
		{Minute: 70, Rows: 4}, // interval 4, past the window
	}}
	q := 15 * time.Minute
	for _, c := range []struct {
		name    string
		windows []Window
		want    []Span
	}{
		{"runs of intervals with more than one row", []Window{{To: day.Add(60 * time.Minute), Every: q}}, []Span{
			{From: day, To: day.Add(30 * time.Minute), Every: q, Extra: 1 + 2},
			{From: day.Add(45 * time.Minute), To: day.Add(60 * time.Minute), Every: q, Extra: 1},
		}},
		{"a window on another day", []Window{{From: day.Add(24 * time.Hour), To: day.Add(48 * time.Hour), Every: time.Hour}}, nil},
		{"a window starting mid-day", []Window{{From: day.Add(15 * time.Minute), To: day.Add(24 * time.Hour), Every: q}}, []Span{
			{From: day.Add(15 * time.Minute), To: day.Add(30 * time.Minute), Every: q, Extra: 2},
			{From: day.Add(45 * time.Minute), To: day.Add(75 * time.Minute), Every: q, Extra: 1 + 3},
		}},
		{"a day's interval", []Window{{To: day.Add(24 * time.Hour), Every: 24 * time.Hour}}, []Span{
			{From: day, To: day.Add(24 * time.Hour), Every: 24 * time.Hour, Extra: 12 - 1},
		}},
		{"two windows' spans stay apart", []Window{
			{From: day.Add(time.Hour), To: day.Add(24 * time.Hour), Every: time.Hour},
			{To: day.Add(45 * time.Minute), Every: q},
		}, []Span{
			{From: day.Add(time.Hour), To: day.Add(2 * time.Hour), Every: time.Hour, Extra: 3},
			{From: day, To: day.Add(30 * time.Minute), Every: q, Extra: 1 + 2},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Spans(tally, c.windows); !slices.Equal(got, c.want) {
				t.Errorf("Spans = %+v, want %+v", got, c.want)
			}
		})
	}
}
