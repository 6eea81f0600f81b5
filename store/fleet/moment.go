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
// (images.Repository.Carried), so a page is one pass over them; a row that
// carries only its way back (Azure's) costs a read of its primary row.
// Either way its cost follows the images of the window. A page may hold
// fewer than limit while more remain.
func (v *View) Moment(ctx context.Context, start, end time.Time, limit int, resume *store.Cursor) ([]images.Image, *store.Cursor, error) {
	if !start.Before(end) || end.Sub(start) > MaxWindow {
		return nil, nil, errors.New("fleet: the window must be after its start and at most MaxWindow long")
	}
	minutes := store.Range{From: store.MinutePartitionKey(start), To: store.MinutePartitionKey(end.Add(time.Minute - 1).Truncate(time.Minute))}
	page, err := v.repo.IndexPage(ctx, minutes, resume, limit)
	if err != nil {
		return nil, nil, err
	}
	found := make([]images.Image, len(page.Entities))
	ok := make([]bool, len(page.Entities))
	read := func(ctx context.Context, i int, row images.IndexRow) error {
		img, err := v.repo.Image(ctx, row.CameraID, row.RowKey)
		if errors.Is(err, store.ErrNotFound) {
			return nil // its create is under way, or gave up
		}
		found[i], ok[i] = img, err == nil
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for i, e := range page.Entities {
		row := images.IndexRowOf(e)
		if at, err := store.TimeFromInvertedTicksRowKey(row.RowKey); row.CameraID == "" || err != nil || at.Before(start) || !at.Before(end) {
			continue
		}
		img, carried, err := v.repo.Carried(e)
		switch {
		case err != nil:
			return nil, nil, err
		case carried:
			found[i], ok[i] = img, true
		case v.embedded != nil:
			if err := read(ctx, i, row); err != nil {
				return nil, nil, err
			}
		default:
			g.Go(func() error { return read(gctx, i, row) })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	out := make([]images.Image, 0, len(page.Entities))
	for i := range page.Entities {
		if ok[i] {
			out = append(out, found[i])
		}
	}
	return out, page.Next, nil
}
