package fleet

import (
	"context"
	"fmt"
	"math/bits"
	"time"

	"github.com/metadatad/metadatad/store"
)

// Coverage is what one camera's images cover of a range, to the minute.
type Coverage struct {
	// Gaps are the spans without an image longer than the expected
	// interval, oldest first.
	Gaps []Gap
	// Covered is the share of the range no gap covers, 0 to 1.
	Covered float64
	// Images counts the images of the range.
	Images int64
}

// Gap is a span of whole minutes without an image: [Start, End).
type Gap struct {
	Start, End time.Time
}

// minutes is a bitmap of the minutes of a range that hold an image.
type minutes struct {
	start time.Time
	bits  []uint64
	n     int
}

func newMinutes(start, end time.Time) *minutes {
	n := int(end.Sub(start) / time.Minute)
	return &minutes{start: start, bits: make([]uint64, (n+63)/64), n: n}
}

// mark records an image at t; false if t lies outside the range.
func (m *minutes) mark(t time.Time) bool {
	if t.Before(m.start) {
		return false
	}
	i := int(t.Sub(m.start) / time.Minute)
	if i >= m.n {
		return false
	}
	m.bits[i/64] |= 1 << (i % 64)
	return true
}

func (m *minutes) has(i int) bool { return m.bits[i/64]&(1<<(i%64)) != 0 }

// next is the first marked minute from i on, or m.n.
func (m *minutes) next(i int) int {
	for i < m.n {
		w := m.bits[i/64] >> (i % 64)
		if w != 0 {
			return min(i+bits.TrailingZeros64(w), m.n)
		}
		i = (i/64 + 1) * 64
	}
	return m.n
}

// Coverage reads the camera's images in [start, end), whole minutes, and
// finds the gaps: the runs of minutes without an image that are as long
// as every or longer, so that two images more than every apart leave one.
// every is whole minutes. The embedded store reads a tally per day of the
// range; Azure reads the keys of the range's rows.
func (v *View) Coverage(ctx context.Context, camera string, start, end time.Time, every time.Duration) (Coverage, error) {
	start, end = start.UTC(), end.UTC()
	m := newMinutes(start, end)
	var images int64
	var err error
	if v.embedded != nil {
		images, err = v.tallyMinutes(ctx, camera, m, end)
	} else {
		images, err = v.keyMinutes(ctx, camera, m, end)
	}
	if err != nil {
		return Coverage{}, fmt.Errorf("fleet: coverage of camera %s: %w", camera, err)
	}
	c := Coverage{Images: images}
	need := int(every / time.Minute)
	gapMinutes := 0
	for i := 0; i < m.n; {
		if m.has(i) {
			i++
			continue
		}
		j := m.next(i)
		if j-i >= need {
			c.Gaps = append(c.Gaps, Gap{Start: start.Add(time.Duration(i) * time.Minute), End: start.Add(time.Duration(j) * time.Minute)})
			gapMinutes += j - i
		}
		i = j
	}
	if m.n > 0 {
		c.Covered = 1 - float64(gapMinutes)/float64(m.n)
	}
	return c, nil
}

// tallyMinutes marks the minutes of the camera's tallies in m's range.
func (v *View) tallyMinutes(ctx context.Context, camera string, m *minutes, end time.Time) (int64, error) {
	var images int64
	firstDay := m.start.Truncate(24 * time.Hour)
	one := store.Range{From: camera, To: camera + " "} // see countDays
	err := v.embedded.Tallies(ctx, v.primary, one, end.Add(-time.Nanosecond), func(t *store.DayTally) error {
		if t.PartitionKey != camera || t.Day.Before(firstDay) {
			return nil
		}
		for _, r := range t.Minutes {
			if r.Rows > 0 && m.mark(t.Day.Add(time.Duration(r.Minute)*time.Minute)) {
				images += int64(r.Rows)
			}
		}
		return nil
	})
	return images, err
}

// keyMinutes marks the minutes of the camera's rows in m's range, reading
// their keys alone: a scan resumed at the range's newest row key, from the
// camera's partition on, that stops at the range's end or the partition's.
func (v *View) keyMinutes(ctx context.Context, camera string, m *minutes, end time.Time) (int64, error) {
	primary, _ := v.repo.Tables()
	start := m.start
	rows := store.InvertedTicksRows(&start, &end)
	scan := store.Scan{Partitions: store.Range{From: camera}, Select: []string{},
		Resume: &store.Cursor{PartitionKey: camera, RowKey: rows.From}}
	var images int64
	for {
		page, err := primary.Scan(ctx, scan)
		if err != nil {
			return 0, err
		}
		for _, e := range page.Entities {
			if e.PartitionKey != camera || e.RowKey >= rows.To {
				return images, nil
			}
			at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
			if err == nil && m.mark(at) {
				images++
			}
		}
		if page.Next == nil {
			return images, nil
		}
		scan.Resume = page.Next
	}
}
