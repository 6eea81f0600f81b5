package watchfeed

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// readsInParallel is how many per-camera reads (or primary row reads) a
// pass, a Subscribe or a Since makes at once.
const readsInParallel = 16

// captureRange is the capture instants [from, to) a read covers, whole
// minutes: the bounds of the index partitions that hold them.
type captureRange struct{ from, to time.Time }

// rangeOf is the capture range from from's minute to the end of to's.
func rangeOf(from, to time.Time) captureRange {
	return captureRange{from: from.Truncate(time.Minute), to: to.Truncate(time.Minute).Add(time.Minute)}
}

// windowOf is the capture range of the images that may become readable at
// now and belong to the feed.
func (f *Feed) windowOf(now time.Time) captureRange {
	return rangeOf(now.Add(-f.window), now.Add(f.window))
}

// indexPartitions is how many index partitions hold the captures of r.
func (f *Feed) indexPartitions(r captureRange) int {
	return int(r.to.Sub(r.from)/time.Minute) * f.repo.IndexShards()
}

// byCamera tells whether reading the primary partitions of n cameras is
// cheaper than scanning the index partitions of r: either costs at least a
// request per partition it reads (see the package doc).
func (f *Feed) byCamera(n int, r captureRange) bool {
	return n <= f.indexPartitions(r)
}

// cameraImages reads a camera's images captured within r from its primary
// partition, newest first.
func (f *Feed) cameraImages(ctx context.Context, camera string, r captureRange) ([]images.Image, error) {
	span := images.Span{Start: &r.from, End: &r.to}
	var out []images.Image
	var resume *store.Cursor
	for {
		imgs, next, err := f.repo.List(ctx, images.ListOptions{CameraID: camera, Span: span, Limit: store.MaxPageSize, Resume: resume})
		if err != nil {
			return nil, err
		}
		out = append(out, imgs...)
		if next == nil {
			return out, nil
		}
		resume = next
	}
}

// indexRows reads the keys of the index rows of r whose camera keep takes,
// in key order: a minute's shards one after the other, each newest first.
func (f *Feed) indexRows(ctx context.Context, r captureRange, keep func(camera string) bool) ([]images.IndexRow, error) {
	var out []images.IndexRow
	partitions := store.Range{From: store.MinutePartitionKey(r.from), To: store.MinutePartitionKey(r.to)}
	err := f.repo.EachIndexRow(ctx, partitions, func(row images.IndexRow) error {
		if keep(row.CameraID) {
			out = append(out, row)
		}
		return nil
	})
	return out, err
}

// indexedImage reads the primary row an index row points at;
// store.ErrNotFound while it has not landed.
func (f *Feed) indexedImage(ctx context.Context, row images.IndexRow) (images.Image, error) {
	return f.repo.IndexedImage(ctx, store.Entity{PartitionKey: row.PartitionKey, RowKey: row.Key.RowKey,
		Properties: store.Properties{images.PropDeviceID: row.CameraID, images.PropMetadataRowKey: row.RowKey}})
}

// inParallel calls read(i) for i in [0, n), readsInParallel at a time, and
// returns the first error after all have returned.
func inParallel(ctx context.Context, n int, read func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(readsInParallel)
	for i := range n {
		g.Go(func() error { return read(ctx, i) })
	}
	return g.Wait()
}
