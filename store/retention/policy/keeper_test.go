package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

func TestInterval(t *testing.T) {
	at := time.Date(2026, 6, 1, 10, 7, 30, 0, time.UTC)
	east := time.FixedZone("UTC+5:30", 5*3600+1800)
	for _, c := range []struct {
		name  string
		at    time.Time
		every time.Duration
		want  time.Time
	}{
		{"a minute", at, time.Minute, time.Date(2026, 6, 1, 10, 7, 0, 0, time.UTC)},
		{"a quarter hour", at, 15 * time.Minute, time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)},
		{"a start is its own interval's", time.Date(2026, 6, 1, 10, 15, 0, 0, time.UTC), 15 * time.Minute, time.Date(2026, 6, 1, 10, 15, 0, 0, time.UTC)},
		{"a day starts at UTC midnight", at, 24 * time.Hour, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"eight hours from UTC midnight", at, 8 * time.Hour, time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)},
		{"whatever the instant's zone", at.In(east), 24 * time.Hour, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)},
		{"year 1 starts an interval", time.Time{}.Add(90 * time.Minute), time.Hour, time.Time{}.Add(time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Interval(c.at, c.every)
			if !got.Equal(c.want) || got.Location() != time.UTC {
				t.Errorf("Interval(%s, %s) = %s, want %s in UTC", c.at, c.every, got, c.want)
			}
		})
	}
}

func TestKeeper(t *testing.T) {
	for _, c := range []struct {
		name      string
		preferred []bool // newest first
		want      int
	}{
		{"one row", []bool{false}, 0},
		{"the earliest, last read", []bool{false, false, false}, 2},
		{"the one preferred", []bool{false, true, false}, 1},
		{"the earliest of those preferred", []bool{true, true, false}, 1},
		{"the earliest, preferred", []bool{true, false, true}, 2},
		{"the newest, the only one preferred", []bool{true, false, false}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Keeper(len(c.preferred), func(i int) bool { return c.preferred[i] }); got != c.want {
				t.Errorf("Keeper = %d, want %d", got, c.want)
			}
		})
	}
	if got := Keeper(4, nil); got != 3 {
		t.Errorf("Keeper without preference = %d, want the earliest, 3", got)
	}
}

func TestPrefer(t *testing.T) {
	clear := store.Entity{Properties: store.Properties{images.PropIsClearDay: true}}
	cloudy := store.Entity{Properties: store.Properties{images.PropIsClearDay: false}}
	unset := store.Entity{Properties: store.Properties{}}
	prefer := Prefer(images.Pano)
	if prefer == nil || !prefer(clear) || prefer(cloudy) || prefer(unset) {
		t.Error("a pano's keeper is not its clear-day image first")
	}
	for _, k := range []images.Kind{images.Single, images.PreStitch} {
		if Prefer(k) != nil {
			t.Errorf("%s has a preference: its rows' values would be read for nothing", k)
		}
	}
}

// thinned is one interval Intervals handed to thin.
type thinned struct {
	rows   []time.Time
	keeper time.Time
}

// gather runs rows (newest first) through Intervals of every.
func gather(t *testing.T, every time.Duration, rows []time.Time, preferred func(time.Time) bool) []thinned {
	t.Helper()
	var out []thinned
	g := NewIntervals(every, func(rows []time.Time, keeper int) error {
		out = append(out, thinned{rows: slices.Clone(rows), keeper: rows[keeper]})
		return nil
	})
	for _, at := range rows {
		if err := g.Add(at, at, preferred != nil && preferred(at)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestIntervals(t *testing.T) {
	day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	m := func(n int) time.Time { return day.Add(time.Duration(n) * time.Minute) }
	newestFirst := []time.Time{m(50), m(46), m(31), m(29), m(20), m(16), m(5), m(0)}
	for _, c := range []struct {
		name      string
		preferred func(time.Time) bool
		want      []thinned
	}{
		{"the earliest of each interval with more than one row", nil, []thinned{
			{rows: []time.Time{m(50), m(46)}, keeper: m(46)},
			{rows: []time.Time{m(29), m(20), m(16)}, keeper: m(16)},
			{rows: []time.Time{m(5), m(0)}, keeper: m(0)},
		}},
		{"the earliest preferred, else the earliest", func(at time.Time) bool { return at.Equal(m(20)) || at.Equal(m(50)) }, []thinned{
			{rows: []time.Time{m(50), m(46)}, keeper: m(50)},
			{rows: []time.Time{m(29), m(20), m(16)}, keeper: m(20)},
			{rows: []time.Time{m(5), m(0)}, keeper: m(0)},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := gather(t, 15*time.Minute, newestFirst, c.preferred)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("thinned %v, want %v", got, c.want)
			}
		})
	}
	if got := gather(t, time.Hour, nil, nil); len(got) != 0 {
		t.Errorf("no rows thinned %v", got)
	}
	failed := fmt.Errorf("thin failed")
	g := NewIntervals(time.Hour, func([]int, int) error { return failed })
	_ = g.Add(m(2), 2, false)
	_ = g.Add(m(1), 1, false)
	if err := g.Add(m(61), 61, false); err != failed {
		t.Errorf("Add closing an interval whose thinning failed: %v, want %v", err, failed)
	}
}

// TestSpansCountWhatIntervalsThin holds the survey's arithmetic from the
// tallies (Spans) to the rows the deleting paths thin (Intervals): the same
// intervals, and in them the same rows but one.
func TestSpansCountWhatIntervalsThin(t *testing.T) {
	day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(43, 1))
	for _, every := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 24 * time.Hour} {
		var rows []time.Time
		for range 400 {
			rows = append(rows, day.Add(time.Duration(rng.IntN(24*60*60))*time.Second))
		}
		slices.SortFunc(rows, func(a, b time.Time) int { return b.Compare(a) }) // newest first
		tally := &store.DayTally{Day: day}
		for i := len(rows) - 1; i >= 0; i-- {
			minute := int(rows[i].Sub(day) / time.Minute)
			if n := len(tally.Minutes); n > 0 && tally.Minutes[n-1].Minute == minute {
				tally.Minutes[n-1].Rows++
			} else {
				tally.Minutes = append(tally.Minutes, store.MinuteRows{Minute: minute, Rows: 1})
			}
		}
		var deleted int64
		intervals := map[time.Time]bool{}
		for _, g := range gather(t, every, rows, nil) {
			deleted += int64(len(g.rows) - 1)
			intervals[Interval(g.rows[0], every)] = true
		}
		var extra int64
		spanned := map[time.Time]bool{}
		for _, s := range Spans(tally, []Window{{From: day, To: day.Add(24 * time.Hour), Every: every}}) {
			extra += s.Extra
			for iv := s.From; iv.Before(s.To); iv = iv.Add(every) {
				spanned[iv] = true
			}
		}
		if extra != deleted || len(spanned) != len(intervals) {
			t.Errorf("every %s: spans count %d rows in %d intervals, Intervals thin %d in %d", every, extra, len(spanned), deleted, len(intervals))
		}
		for iv := range intervals {
			if !spanned[iv] {
				t.Errorf("every %s: interval %s thinned outside the spans", every, iv)
			}
		}
	}
}
