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
// answers each in a round trip; the embedded store answers in
// microseconds, less than a goroutine's handoff, so Moment reads its rows
// one at a time.
const readers = 16

// Moment returns a page of up to limit images of every camera captured in
// [start, end), a window of at most MaxWindow, in index order (capture
// minute, then, within a minute, newest first), and the cursor of the
// next page (nil once none remains). It scans the index partitions of the
// window's minutes by their keys alone and reads each image's primary row,
// so its cost follows the images of the window. A page may hold fewer
// than limit while more remain.
func (v *View) Moment(ctx context.Context, start, end time.Time, limit int, resume *store.Cursor) ([]images.Image, *store.Cursor, error) {
	if !start.Before(end) || end.Sub(start) > MaxWindow {
		return nil, nil, errors.New("fleet: the window must be after its start and at most MaxWindow long")
	}
	minutes := store.Range{From: store.MinutePartitionKey(start), To: store.MinutePartitionKey(end.Add(time.Minute - 1).Truncate(time.Minute))}
	scan := v.repo.ScanIndexFrom(minutes, resume, limit)
	rows, _, err := scan.Next(ctx)
	if err != nil {
		return nil, nil, err
	}
	found := make([]images.Image, len(rows))
	ok := make([]bool, len(rows))
	read := func(ctx context.Context, i int) error {
		img, err := v.repo.Image(ctx, rows[i].CameraID, rows[i].RowKey)
		if errors.Is(err, store.ErrNotFound) {
			return nil // its create is under way, or gave up
		}
		found[i], ok[i] = img, err == nil
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for i, row := range rows {
		at, err := store.TimeFromInvertedTicksRowKey(row.RowKey)
		switch {
		case row.CameraID == "" || err != nil || at.Before(start) || !at.Before(end):
		case v.embedded != nil:
			if err := read(ctx, i); err != nil {
				return nil, nil, err
			}
		default:
			g.Go(func() error { return read(gctx, i) })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	out := make([]images.Image, 0, len(rows))
	for i := range rows {
		if ok[i] {
			out = append(out, found[i])
		}
	}
	return out, scan.Cursor(), nil
}
