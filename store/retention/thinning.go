package retention

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
)

// Tiered thinning (docs/thinning.md): past a tier's AfterDays, a camera
// keeps one image of a kind per KeepOnePer, up to the tier's UntilDays.
// Intervals are aligned on multiples of KeepOnePer since the first
// instant, so two passes cut the same intervals and a second pass over
// thinned rows deletes nothing; an interval is thinned only once it lies
// wholly inside the tier's ages.

// Tier is one step of a kind's thinning.
type Tier struct {
	// AfterDays is the age, in days, from which the tier thins.
	AfterDays int
	// KeepOnePer is the interval of which one image is kept: whole minutes
	// dividing a day, so that every day starts an interval.
	KeepOnePer time.Duration
	// UntilDays is the age the tier thins up to; 0 means up to the kind's
	// retention days, or for ever when the policy gives it none.
	UntilDays int
}

// MaxTiers bounds a kind's tiers: a purge resolves each camera's.
const MaxTiers = 8

// MaxDays is the most days a policy may keep a kind, or a tier reach.
const MaxDays = 100_000

// TierProblem is what is wrong with one field of a kind's tiers: Tier is
// the tier's index, -1 for the list itself; Field is "after_days",
// "keep_one_per" or "until_days", empty for the whole tier or list.
type TierProblem struct {
	Tier    int
	Field   string
	Problem string
}

// CheckTiers checks a kind's tiers against each other and its retention
// days (0: none), with floor the fewest days a tier may start at.
func CheckTiers(days int, tiers []Tier, floor int) []TierProblem {
	var out []TierProblem
	add := func(i int, field, format string, args ...any) {
		out = append(out, TierProblem{Tier: i, Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if len(tiers) > MaxTiers {
		add(-1, "", "at most %d tiers", MaxTiers)
		return out
	}
	floor = max(floor, 1)
	for i, t := range tiers {
		switch {
		case t.AfterDays < floor:
			add(i, "after_days", "must be at least %d", floor)
		case t.AfterDays > MaxDays:
			add(i, "after_days", "must be at most %d", MaxDays)
		case days > 0 && t.AfterDays >= days:
			add(i, "after_days", "must be less than the type's retention days (%d)", days)
		case i > 0 && tiers[i-1].UntilDays != 0 && t.AfterDays < tiers[i-1].UntilDays:
			add(i, "after_days", "must be at least the previous tier's until_days (%d)", tiers[i-1].UntilDays)
		}
		if !ValidInterval(t.KeepOnePer) {
			add(i, "keep_one_per", "must be whole minutes that divide a day, from 1m to 24h")
		}
		switch {
		case t.UntilDays < 0:
			add(i, "until_days", "must not be negative")
		case t.UntilDays == 0 && i < len(tiers)-1:
			add(i, "until_days", "must be set on every tier but the last (0 means open-ended)")
		case t.UntilDays != 0 && t.UntilDays <= t.AfterDays:
			add(i, "until_days", "must be 0 or more than after_days (%d)", t.AfterDays)
		case days > 0 && t.UntilDays > days:
			add(i, "until_days", "must be at most the type's retention days (%d)", days)
		case t.UntilDays > MaxDays:
			add(i, "until_days", "must be at most %d", MaxDays)
		}
	}
	return out
}

// ValidInterval reports whether d can be a tier's KeepOnePer.
func ValidInterval(d time.Duration) bool {
	return d >= time.Minute && d%time.Minute == 0 && (24*time.Hour)%d == 0
}

// encodeTiers writes tiers as a policy row's property: "after:minutes:until"
// per tier, comma-separated, readable in a storage browser.
func encodeTiers(tiers []Tier) string {
	parts := make([]string, len(tiers))
	for i, t := range tiers {
		parts[i] = fmt.Sprintf("%d:%d:%d", t.AfterDays, t.KeepOnePer/time.Minute, t.UntilDays)
	}
	return strings.Join(parts, ",")
}

// decodeTiers reads encodeTiers' form.
func decodeTiers(s string) ([]Tier, error) {
	if s == "" {
		return nil, nil
	}
	var out []Tier
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
		out = append(out, Tier{AfterDays: n[0], KeepOnePer: time.Duration(n[1]) * time.Minute, UntilDays: n[2]})
	}
	return out, nil
}

// thinWindow is where one tier thins, resolved at a job's instant: the
// rows captured in [From, To), both on boundaries of Every; From zero
// means from a camera's first row. A task names its cameras' (Azure).
type thinWindow struct {
	From  time.Time     `json:"from,omitzero"`
	To    time.Time     `json:"to"`
	Every time.Duration `json:"every"`
}

// thinWindows resolves a kind's tiers at now, with days its retention (0:
// none): the intervals wholly inside each tier's ages.
func thinWindows(now time.Time, days int, tiers []Tier) []thinWindow {
	var out []thinWindow
	for _, t := range tiers {
		w := thinWindow{Every: t.KeepOnePer, To: now.Add(-Days(t.AfterDays)).UTC().Truncate(t.KeepOnePer)}
		until := t.UntilDays
		if until == 0 {
			until = days
		}
		if until > 0 {
			oldest := now.Add(-Days(until)).UTC()
			if w.From = oldest.Truncate(t.KeepOnePer); w.From.Before(oldest) {
				w.From = w.From.Add(t.KeepOnePer)
			}
			if !w.From.Before(w.To) {
				continue
			}
		}
		out = append(out, w)
	}
	return out
}

// newest is the end of the newest window; zero without windows.
func newestThinned(ws []thinWindow) time.Time {
	var t time.Time
	for _, w := range ws {
		t = maxTime(t, w.To)
	}
	return t
}

// thinSpan is a run of a day's intervals that hold more than one row:
// ThinRows' bounds, and the rows it will delete.
type thinSpan struct {
	from, to time.Time
	every    time.Duration
	extra    int64
}

// thinSpans reads, from a day's tally alone, what the windows thin of it:
// each run of consecutive intervals with more than one row, and how many
// rows thinning it deletes (all but one per interval). The tally is exact,
// so these counts are what ThinRows deletes.
func thinSpans(t *store.DayTally, windows []thinWindow) []thinSpan {
	var out []thinSpan
	dayEnd := t.Day.Add(24 * time.Hour)
	for _, w := range windows {
		from, to := maxTime(w.From, t.Day), minTime(w.To, dayEnd)
		if !from.Before(to) {
			continue
		}
		per := int(w.Every / time.Minute)
		first, end := int(from.Sub(t.Day)/time.Minute), int(to.Sub(t.Day)/time.Minute)
		run := -1 // the span of out the next interval may extend
		interval, rows := -1, int64(0)
		closeInterval := func() {
			if rows > 1 {
				start := t.Day.Add(time.Duration(interval*per) * time.Minute)
				if run >= 0 && out[run].to.Equal(start) {
					out[run].to, out[run].extra = start.Add(w.Every), out[run].extra+rows-1
				} else {
					out = append(out, thinSpan{from: start, to: start.Add(w.Every), every: w.Every, extra: rows - 1})
					run = len(out) - 1
				}
			}
		}
		for _, m := range t.Minutes {
			if m.Minute < first || m.Minute >= end || m.Rows == 0 {
				continue
			}
			if i := m.Minute / per; i != interval {
				closeInterval()
				interval, rows = i, 0
			}
			rows += int64(m.Rows)
		}
		closeInterval()
	}
	return out
}
