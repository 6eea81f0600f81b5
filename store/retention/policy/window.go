package policy

import (
	"time"

	"github.com/metadatad/metadatad/store"
)

// Window is where one tier thins, resolved at a job's instant: the rows
// captured in [From, To), both on interval boundaries of Every; From zero
// means from a camera's first row. The queue design records its cameras'
// windows in their tasks, hence the JSON names.
type Window struct {
	From  time.Time     `json:"from,omitzero"`
	To    time.Time     `json:"to"`
	Every time.Duration `json:"every"`
}

// Windows resolves a kind's tiers at now, with days its retention (0:
// none): the intervals wholly inside each tier's ages. An interval that
// straddles a tier's edge waits for a later pass, so that one tier thins
// it whole.
func Windows(now time.Time, days int, tiers []Tier) []Window {
	var out []Window
	for _, t := range tiers {
		w := Window{Every: t.KeepOnePer, To: Interval(now.Add(-Days(t.AfterDays)), t.KeepOnePer)}
		until := t.UntilDays
		if until == 0 {
			until = days
		}
		if until > 0 {
			oldest := now.Add(-Days(until)).UTC()
			if w.From = Interval(oldest, t.KeepOnePer); w.From.Before(oldest) {
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

// NewestThinned is the end of the newest window; zero without windows. A
// camera whose oldest row is no older has nothing to thin.
func NewestThinned(ws []Window) time.Time {
	var t time.Time
	for _, w := range ws {
		if w.To.After(t) {
			t = w.To
		}
	}
	return t
}

// Span is a run of a day's consecutive intervals that each hold more than
// one row: the bounds of one store.PurgeBatch.ThinRows call, and Extra the
// rows it deletes.
type Span struct {
	From, To time.Time
	Every    time.Duration
	Extra    int64
}

// Spans reads, from a day's tally alone, what the windows thin of it: each
// run of consecutive intervals with more than one row, and how many rows
// thinning it deletes (all but the keeper of each interval). The tally is
// exact, so these counts are what ThinRows deletes, and a day with nothing
// to thin costs no read of its rows.
func Spans(t *store.DayTally, windows []Window) []Span {
	var out []Span
	dayEnd := t.Day.Add(24 * time.Hour)
	for _, w := range windows {
		from, to := w.From, w.To
		if from.Before(t.Day) {
			from = t.Day
		}
		if to.After(dayEnd) {
			to = dayEnd
		}
		if !from.Before(to) {
			continue
		}
		out = appendSpans(out, t, w.Every, from, to)
	}
	return out
}

// appendSpans appends the spans of a day's tally in [from, to), which lie
// on interval boundaries of every.
func appendSpans(out []Span, t *store.DayTally, every time.Duration, from, to time.Time) []Span {
	run := -1 // the span of out the next interval may extend
	var interval time.Time
	var rows int64
	closeInterval := func() {
		if thinned := rows - kept(rows); thinned > 0 {
			if run >= 0 && out[run].To.Equal(interval) {
				out[run].To, out[run].Extra = interval.Add(every), out[run].Extra+thinned
			} else {
				out = append(out, Span{From: interval, To: interval.Add(every), Every: every, Extra: thinned})
				run = len(out) - 1
			}
		}
	}
	for _, m := range t.Minutes {
		at := t.Day.Add(time.Duration(m.Minute) * time.Minute)
		if at.Before(from) || !at.Before(to) || m.Rows == 0 {
			continue
		}
		if iv := Interval(at, every); !iv.Equal(interval) {
			closeInterval()
			interval, rows = iv, 0
		}
		rows += int64(m.Rows)
	}
	closeInterval()
	return out
}
