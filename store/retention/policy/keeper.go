package policy

import (
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// The keeper rule of thinning, which every path that thins applies
// through this file (the embedded store's range deletion, the queue
// design's queried deletes, and the survey's counts from the tallies):
// a window is cut into intervals of Every aligned on multiples of Every
// since year 1, and of each interval's rows one is kept, the earliest, or
// for a pano the earliest clear-day one when it has one.

// Interval is the start of the interval of every that holds at. Intervals
// are aligned on multiples of every since year 1 (time.Time's zero, from
// which Truncate counts), not on a job's instant or a camera's first row,
// so every pass on every path cuts the same intervals: a second pass over
// thinned rows finds one row per interval and deletes nothing.
func Interval(at time.Time, every time.Duration) time.Time {
	return at.UTC().Truncate(every)
}

// Prefer returns which rows of kind k an interval keeps first, nil when
// the kind has no preference (its keeper is its earliest row, and a path
// that would read rows' values to choose need not). A pano is kept first
// by a clear-day image, the one worth keeping of an interval's sky.
func Prefer(k images.Kind) func(store.Entity) bool {
	if k != images.Pano {
		return nil
	}
	return func(e store.Entity) bool {
		clear, _ := e.Properties[images.PropIsClearDay].(bool)
		return clear
	}
}

// Keeper is the index of the kept row of an interval's rows, given newest
// first (the order of their inverted-tick row keys): the earliest that
// preferred reports, else the earliest. preferred may be nil.
func Keeper(rows int, preferred func(i int) bool) int {
	if preferred != nil {
		for i := rows - 1; i >= 0; i-- {
			if preferred(i) {
				return i
			}
		}
	}
	return rows - 1
}

// kept is how many of an interval's rows its keeper rule keeps.
func kept(rows int64) int64 { return min(rows, 1) }

// Intervals applies the keeper rule to rows read in row-key order (newest
// first) within one window of Every: it gathers each interval's rows and,
// once the interval's last row is read, hands those of an interval with
// more than one row, and the index of their keeper, to thin. R is what
// the path needs of a row to delete it.
type Intervals[R any] struct {
	every     time.Duration
	thin      func(rows []R, keeper int) error
	start     time.Time
	rows      []R
	preferred []bool
}

// NewIntervals starts gathering rows of intervals of every; thin gets each
// interval's rows, valid during the call only.
func NewIntervals[R any](every time.Duration, thin func(rows []R, keeper int) error) *Intervals[R] {
	return &Intervals[R]{every: every, thin: thin}
}

// Add gathers a row captured at, preferred when the kind's Prefer picks it,
// closing the interval before it when the row starts another. Rows must
// come newest first.
func (g *Intervals[R]) Add(at time.Time, row R, preferred bool) error {
	if iv := Interval(at, g.every); len(g.rows) == 0 || !iv.Equal(g.start) {
		if err := g.Close(); err != nil {
			return err
		}
		g.start = iv
	}
	g.rows = append(g.rows, row)
	g.preferred = append(g.preferred, preferred)
	return nil
}

// Close closes the interval being gathered: it hands its rows to thin if
// there are more than one. It is called after the window's last row.
func (g *Intervals[R]) Close() error {
	rows, preferred := g.rows, g.preferred
	g.rows, g.preferred = g.rows[:0], g.preferred[:0]
	if len(rows) < 2 { // a row alone is its interval's keeper
		return nil
	}
	return g.thin(rows, Keeper(len(rows), func(i int) bool { return preferred[i] }))
}
