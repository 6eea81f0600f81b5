package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
)

// MaxSilentScan bounds the cameras one Silent call examines: a page of a
// fleet with few silent cameras ends there, with fewer cameras than asked
// and a place to resume, rather than reading the whole fleet in one call.
const MaxSilentScan = 10000

// CameraQuery asks for a page of the inventory.
type CameraQuery struct {
	// Prefix keeps the cameras whose id starts with it.
	Prefix string
	// After resumes after this camera id; empty starts at the first.
	After string
	// Limit caps the page, 1 or more.
	Limit int
	// DaysFrom and DaysTo, UTC midnights, bound the days whose images are
	// counted, [DaysFrom, DaysTo); zero counts none.
	DaysFrom, DaysTo time.Time
}

// Cameras returns a page of the inventory in camera id order, and the id
// a next page resumes after: empty when no camera remains.
func (v *View) Cameras(ctx context.Context, q CameraQuery) ([]Camera, string, error) {
	counting := !q.DaysTo.IsZero()
	if counting && v.embedded == nil {
		return nil, "", ErrNoDailyCounts
	}
	var cams []Camera
	more := false
	err := v.eachCamera(ctx, q.Prefix, q.After, q.Limit+1, func(c Camera) bool {
		if len(cams) == q.Limit {
			more = true
			return false
		}
		cams = append(cams, c)
		return true
	})
	if err != nil {
		return nil, "", err
	}
	if counting && len(cams) > 0 {
		if err := v.countDays(ctx, cams, q.DaysFrom, q.DaysTo); err != nil {
			return nil, "", err
		}
	}
	if !more {
		return cams, "", nil
	}
	return cams, cams[len(cams)-1].ID, nil
}

// SilentQuery asks for a page of the silent cameras.
type SilentQuery struct {
	Prefix, After string
	Limit         int
	// SilentFor is the age past which a camera's latest image makes it
	// silent; LookBack, longer, the age past which it is retired instead.
	SilentFor, LookBack time.Duration
}

// Silent returns a page of the cameras whose latest image is older than
// SilentFor and not older than LookBack, in camera id order, the id a next
// page resumes after (empty when none remains) and the instant the ages
// are measured from. It examines at most MaxSilentScan cameras, so a page
// may hold fewer than Limit, even none, while more remain.
func (v *View) Silent(ctx context.Context, q SilentQuery) ([]Camera, string, time.Time, error) {
	now := v.now().UTC()
	var cams []Camera
	examined, next := 0, ""
	err := v.eachCamera(ctx, q.Prefix, q.After, 0, func(c Camera) bool {
		if len(cams) == q.Limit || examined == MaxSilentScan {
			return false
		}
		examined++
		if silent(c.Latest, now, q.SilentFor, q.LookBack) {
			cams = append(cams, c)
		}
		next = c.ID
		return true
	})
	if err != nil {
		return nil, "", time.Time{}, err
	}
	if len(cams) < q.Limit && examined < MaxSilentScan {
		next = "" // the scan reached the end
	}
	return cams, next, now, nil
}

// CountSilent counts the silent cameras of the whole fleet (see Silent).
func (v *View) CountSilent(ctx context.Context, silentFor, lookBack time.Duration) (int, error) {
	now := v.now().UTC()
	n := 0
	err := v.eachCamera(ctx, "", "", 0, func(c Camera) bool {
		if silent(c.Latest, now, silentFor, lookBack) {
			n++
		}
		return true
	})
	return n, err
}

func silent(latest, now time.Time, silentFor, lookBack time.Duration) bool {
	return latest.Before(now.Add(-silentFor)) && !latest.Before(now.Add(-lookBack))
}

// eachCamera visits the cameras whose id starts with prefix, after after,
// in id order, until visit returns false. want, when above 0, is how many
// the caller will visit at most: the camera table is then read in pages of
// no more than remain to visit (up to store.MaxPageSize), so that the
// camera that only tells a page of the inventory has a next costs a read
// of one row, not of a whole page of the table.
func (v *View) eachCamera(ctx context.Context, prefix, after string, want int, visit func(Camera) bool) error {
	from := max(prefix, after)
	keep := func(id string) (skip, stop bool) {
		return id <= after && after != "", !strings.HasPrefix(id, prefix)
	}
	if v.embedded != nil {
		return v.embedded.PartitionEnds(ctx, v.primary, from, func(pk, newest, oldest string) (bool, error) {
			skip, stop := keep(pk)
			if stop || skip {
				return !stop, nil
			}
			first, latest, ok := endsOf(newest, oldest)
			if !ok {
				return true, nil // rows of another writer, not images
			}
			return visit(Camera{ID: pk, First: first, Latest: latest}), nil
		})
	}
	scan := store.Scan{Partitions: store.Range{From: from}, Select: []string{propFirst, propLatest}}
	for visited := 0; ; {
		if want > 0 {
			scan.Limit = min(max(want-visited, 1), store.MaxPageSize)
		}
		page, err := v.cameras.Scan(ctx, scan)
		if err != nil {
			return err
		}
		for _, e := range page.Entities {
			skip, stop := keep(e.PartitionKey)
			switch {
			case stop:
				return nil
			case skip || e.RowKey != cameraRowKey:
				continue
			}
			first, _ := e.Properties[propFirst].(time.Time)
			latest, _ := e.Properties[propLatest].(time.Time)
			visited++
			if !visit(Camera{ID: e.PartitionKey, First: first.UTC(), Latest: latest.UTC()}) {
				return nil
			}
		}
		if page.Next == nil {
			return nil
		}
		scan.Resume = page.Next
	}
}

// countDays fills the cameras' Days from the tallies of [from, to): one
// tally per camera and day, read in one pass over the page's id range.
func (v *View) countDays(ctx context.Context, cams []Camera, from, to time.Time) error {
	at := make(map[string]int, len(cams))
	for i, c := range cams {
		at[c.ID] = i
	}
	// No valid camera id lies between an id and the id and a space: a
	// character below the space is a control character, which ids refuse.
	ids := store.Range{From: cams[0].ID, To: cams[len(cams)-1].ID + " "}
	err := v.embedded.Tallies(ctx, v.primary, ids, to.Add(-time.Nanosecond), func(t *store.DayTally) error {
		i, ok := at[t.PartitionKey]
		if !ok || t.Day.Before(from) {
			return nil
		}
		if n := t.Total(); n > 0 {
			cams[i].Days = append(cams[i].Days, DayCount{Day: t.Day.UTC(), Images: n})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fleet: images per day: %w", err)
	}
	return nil
}
