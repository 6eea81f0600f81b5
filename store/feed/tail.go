package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// Run tails the index every Options.Poll until ctx ends, feeding the new
// images of watched cameras; a failed pass is logged and the next one tries
// again. Without Poll it returns at once.
func (f *Feed) Run(ctx context.Context) {
	if f.poll <= 0 {
		return
	}
	t := &tail{feed: f, seen: make(map[string]map[string]struct{}), pending: make(map[string]time.Time)}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := t.pass(ctx); err != nil && ctx.Err() == nil {
			f.log.WarnContext(ctx, "feed: tail pass failed; trying again", "kind", f.repo.Kind(), "err", err)
		}
		timer.Reset(f.poll)
	}
}

// tail is the state of Run between passes.
type tail struct {
	feed *Feed
	// seen holds, per index partition within the window, the row keys
	// already fed or passed over.
	seen map[string]map[string]struct{}
	// pending holds when each index row of a watched camera was first found
	// without its primary row.
	pending map[string]time.Time
	// passes counts the passes that completed.
	passes int
}

// newRow is an index row found for the first time, and its image when it is
// to be fed.
type newRow struct {
	partition, row string
	img            *images.Image
}

// pass scans the index partitions within the window of now once. The first
// pass only learns what exists; later ones feed the new rows of watched
// cameras whose primary row is there. Which cameras are watched is asked
// after a row is read: a subscription that begins later began after the row
// was readable.
func (t *tail) pass(ctx context.Context) error {
	f := t.feed
	now := f.now()
	from := store.MinutePartitionKey(now.Add(-f.window))
	_, index := f.repo.Tables()
	var found []newRow
	scan := store.Scan{Partitions: store.Range{From: from, To: minuteAfter(now.Add(f.window))}}
	for {
		page, err := index.Scan(ctx, scan)
		if err != nil {
			return fmt.Errorf("feed: scan %s: %w", index.Name(), err)
		}
		for _, e := range page.Entities {
			if _, ok := t.seen[e.PartitionKey][e.RowKey]; ok {
				continue
			}
			row := newRow{partition: e.PartitionKey, row: e.RowKey}
			if t.passes == 0 || !f.watched(images.IndexedCamera(e)) {
				found = append(found, row)
				continue
			}
			img, err := f.repo.IndexedImage(ctx, e)
			key := e.PartitionKey + "/" + e.RowKey
			switch {
			case errors.Is(err, store.ErrNotFound):
				first, ok := t.pending[key]
				if !ok {
					t.pending[key] = now
				} else if now.Sub(first) > f.repo.IndexLag()+f.poll {
					// The create gave up: its primary row will never land.
					delete(t.pending, key)
					found = append(found, row)
				}
				continue
			case err != nil:
				return err
			}
			delete(t.pending, key)
			row.img = &img
			found = append(found, row)
		}
		if page.Next == nil {
			break
		}
		scan.Resume = page.Next
	}
	t.feed.publish(newImages(found), now)
	for _, r := range found {
		rows := t.seen[r.partition]
		if rows == nil {
			rows = make(map[string]struct{})
			t.seen[r.partition] = rows
		}
		rows[r.row] = struct{}{}
	}
	for partition := range t.seen {
		if partition < from {
			delete(t.seen, partition)
		}
	}
	for key, first := range t.pending {
		if now.Sub(first) > f.repo.IndexLag()+f.poll+f.window {
			delete(t.pending, key)
		}
	}
	t.passes++
	if t.passes == 1 {
		close(f.primed)
	}
	return nil
}

// newImages are the images of rows to feed, each camera's in ascending
// capture order.
func newImages(rows []newRow) []images.Image {
	var imgs []images.Image
	for _, r := range rows {
		if r.img != nil {
			imgs = append(imgs, *r.img)
		}
	}
	slices.SortStableFunc(imgs, func(a, b images.Image) int {
		return cmp.Or(a.CapturedAt.Compare(b.CapturedAt), cmp.Compare(a.CameraID, b.CameraID))
	})
	return imgs
}

// minuteAfter is the partition key of the minute after t's: the exclusive
// bound of a scan that ends with t's minute, all its shards included
// ("202601010000_7" sorts before "202601010001").
func minuteAfter(t time.Time) string {
	return store.MinutePartitionKey(t.Truncate(time.Minute).Add(time.Minute))
}
