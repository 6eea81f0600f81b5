package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// Run tails the index every Options.Poll until ctx ends, feeding the new
// images of watched cameras; a failed pass is logged and the next one tries
// again. Without Poll it returns at once.
func (f *Feed) Run(ctx context.Context) {
	t := f.tail
	if t == nil {
		return
	}
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
	// mu is held through each pass, and by Subscribe while it checks the
	// unconfirmed rows of its cameras (see confirm), so that no row is
	// first seen between that check and the subscription.
	mu sync.Mutex
	// seen holds, per index partition within the window, the row keys
	// already fed or passed over.
	seen map[string]map[string]struct{}
	// pending holds when each index row of a watched camera was first found
	// without its primary row.
	pending map[string]time.Time
	// unconfirmed holds, per camera, the index rows passed over while no
	// subscription watched the camera, for the index lag after they were
	// first seen: their primary rows may not have landed yet, and one that
	// lands after a watch of its camera began belongs to that watch.
	unconfirmed map[string]map[string]unconfirmedRow
	// passes counts the passes that completed.
	passes int
}

// unconfirmedRow is an index row passed over before its camera was watched.
type unconfirmedRow struct {
	index     store.Entity
	firstSeen time.Time
}

func newTail(f *Feed) *tail {
	return &tail{feed: f, seen: make(map[string]map[string]struct{}), pending: make(map[string]time.Time),
		unconfirmed: make(map[string]map[string]unconfirmedRow)}
}

// newRow is an index row found for the first time, and its image when it is
// to be fed.
type newRow struct {
	partition, row string
	img            *images.Image
}

// pass scans the index partitions within the window of now once. The first
// pass only learns what exists; later ones feed the new rows of watched
// cameras whose primary row is there. The rows of cameras not watched are
// passed over unread, and kept as unconfirmed for the index lag: a
// subscription that begins later checks them (see confirm), as the primary
// row of one may land after it began.
func (t *tail) pass(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
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
			key := e.PartitionKey + "/" + e.RowKey
			if camera := images.IndexedCamera(e); t.passes == 0 || !f.watched(camera) {
				rows := t.unconfirmed[camera]
				if rows == nil {
					rows = make(map[string]unconfirmedRow)
					t.unconfirmed[camera] = rows
				}
				rows[key] = unconfirmedRow{index: e, firstSeen: now}
				found = append(found, row)
				continue
			}
			img, err := f.repo.IndexedImage(ctx, e)
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
	for camera, rows := range t.unconfirmed {
		for key, r := range rows {
			if now.Sub(r.firstSeen) > f.repo.IndexLag()+f.poll {
				delete(rows, key)
			}
		}
		if len(rows) == 0 {
			delete(t.unconfirmed, camera)
		}
	}
	t.passes++
	if t.passes == 1 {
		close(f.primed)
	}
	return nil
}

// confirmInParallel is how many primary rows confirm reads at once.
const confirmInParallel = 16

// confirm reads the primary row of each unconfirmed index row of cameras,
// t.mu held, before a subscription of them begins. A row whose primary row
// is there was readable before the subscription: it is confirmed and never
// fed to it. A row whose primary row is missing (or could not be read) is
// made pending, as if seen while watched, so the next passes feed it once
// it lands, up to the index lag after it was first seen.
func (t *tail) confirm(ctx context.Context, cameras []string) {
	type check struct {
		camera, key string
		row         unconfirmedRow
		landed      bool
	}
	var checks []*check
	for _, camera := range cameras {
		for key, row := range t.unconfirmed[camera] {
			checks = append(checks, &check{camera: camera, key: key, row: row})
		}
	}
	var g errgroup.Group
	g.SetLimit(confirmInParallel)
	for _, c := range checks {
		g.Go(func() error {
			_, err := t.feed.repo.IndexedImage(ctx, c.row.index)
			c.landed = err == nil
			return nil
		})
	}
	_ = g.Wait()
	for _, c := range checks {
		delete(t.unconfirmed[c.camera], c.key)
		if c.landed {
			continue
		}
		delete(t.seen[c.row.index.PartitionKey], c.row.index.RowKey)
		if _, ok := t.pending[c.key]; !ok {
			t.pending[c.key] = c.row.firstSeen
		}
	}
	for _, camera := range cameras {
		if len(t.unconfirmed[camera]) == 0 {
			delete(t.unconfirmed, camera)
		}
	}
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
