package fleet

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// MaxWindow bounds the window of one Moment query: the index partitions
// it may have to read stay a bounded number of minutes.
const MaxWindow = time.Hour

// readers bounds the primary rows Moment reads at once on Azure, which
// answers each in a round trip; the embedded store answers the few it has
// to read (index rows that carry no image) in microseconds, less than a
// goroutine's handoff, so Moment reads those one at a time.
const readers = 16

// Moment returns a page of up to limit images of every camera captured in
// [start, end), a window of at most MaxWindow, in index order (capture
// minute, then, within a minute, newest first), and the cursor of the
// next page (nil once none remains). It reads the index partitions of the
// window's minutes: on the embedded store their rows carry the images
// (images.Repository.WalkIndex), so a page is one pass over them; a row that
// carries only its way back (Azure's) costs a read of its primary row.
// Either way its cost follows the images of the window. A page may hold
// fewer than limit while more remain.
func (v *View) Moment(ctx context.Context, start, end time.Time, limit int, resume *store.Cursor) ([]images.Image, *store.Cursor, error) {
	if !start.Before(end) || end.Sub(start) > MaxWindow {
		return nil, nil, errors.New("fleet: the window must be after its start and at most MaxWindow long")
	}
	minutes := store.Range{From: store.MinutePartitionKey(start), To: store.MinutePartitionKey(end.Add(time.Minute - 1).Truncate(time.Minute))}
	inWindow := func(at time.Time) bool { return !at.Before(start) && at.Before(end) }
	var (
		found = make([]images.Image, 0, min(limit, store.MaxPageSize))
		ok    = make([]bool, 0, cap(found))
		// unread are the rows that carry no image, each with its image's
		// place in found.
		unread []unreadRow
	)
	next, err := v.repo.WalkIndex(ctx, minutes, resume, limit, func(row images.IndexRow, img images.Image, carried bool) error {
		if carried {
			if inWindow(img.CapturedAt) {
				found, ok = append(found, img), append(ok, true)
			}
			return nil
		}
		if at, err := store.TimeFromInvertedTicksRowKey(row.RowKey); row.CameraID == "" || err != nil || !inWindow(at) {
			return nil
		}
		unread = append(unread, unreadRow{at: len(found), row: row})
		found, ok = append(found, images.Image{}), append(ok, false)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	read := func(ctx context.Context, u unreadRow) error {
		img, err := v.repo.Image(ctx, u.row.CameraID, u.row.RowKey)
		if errors.Is(err, store.ErrNotFound) {
			return nil // its create is under way, or gave up
		}
		found[u.at], ok[u.at] = img, err == nil
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for _, u := range unread {
		if v.embedded != nil {
			if err := read(ctx, u); err != nil {
				return nil, nil, err
			}
			continue
		}
		g.Go(func() error { return read(gctx, u) })
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	out := found[:0] // in place: an image moves only to a lower index
	for i := range found {
		if ok[i] {
			out = append(out, found[i])
		}
	}
	return out, next, nil
}

// unreadRow is an index row that carries no image, and the place of its
// image in a page.
type unreadRow struct {
	at  int
	row images.IndexRow
}
