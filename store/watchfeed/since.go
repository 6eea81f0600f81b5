package watchfeed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// minuteKeyLen is the length of a capture minute's partition key, yyyyMMddHHmm,
// without the shard suffix.
const minuteKeyLen = len("200601021504")

// Since hands emit every image of cameras that the feed can have delivered
// with stamp or a later Stamp: those captured from stamp less Window and
// ClockSkew to Window ahead of now, each camera's in ascending capture
// order. The caller keeps stamp within MaxResumeAge.
//
// It reads each camera's primary partition over that range, unless the
// index partitions of the range are fewer than the cameras and stamp is
// recent (within Window and ClockSkew): then one scan of the index costs
// fewer requests, and reads no more of the other cameras' rows than a few
// tail passes do. A resume from further back always costs only the
// caller's cameras. Index rows whose primary row is not there are passed
// over: a tail feeds them once it lands.
func (f *Feed) Since(ctx context.Context, cameras map[string]bool, stamp time.Time, emit func(images.Image) error) error {
	now := f.now()
	r := rangeOf(stamp.Add(-f.window-ClockSkew), now.Add(f.window))
	if f.byCamera(len(cameras), r) || now.Sub(stamp) > f.window+ClockSkew {
		return f.sinceByCamera(ctx, slices.Sorted(maps.Keys(cameras)), r, emit)
	}
	return f.sinceByIndex(ctx, cameras, r, emit)
}

// sinceByCamera reads the images of r of each camera from its primary
// partition, and emits each camera's in ascending capture order.
func (f *Feed) sinceByCamera(ctx context.Context, cameras []string, r captureRange, emit func(images.Image) error) error {
	var emitting sync.Mutex
	return inParallel(ctx, len(cameras), func(ctx context.Context, i int) error {
		imgs, err := f.cameraImages(ctx, cameras[i], r)
		if err != nil {
			return fmt.Errorf("watchfeed: read camera %s: %w", cameras[i], err)
		}
		emitting.Lock()
		defer emitting.Unlock()
		// The partition runs newest first.
		for _, img := range slices.Backward(imgs) {
			if err := emit(img); err != nil {
				return err
			}
		}
		return nil
	})
}

// sinceByIndex scans the index partitions of r, keys only, and emits the
// images of cameras minute by minute, each minute's in ascending capture
// order.
func (f *Feed) sinceByIndex(ctx context.Context, cameras map[string]bool, r captureRange, emit func(images.Image) error) error {
	rows, err := f.indexRows(ctx, r, func(camera string) bool { return cameras[camera] })
	if err != nil {
		return fmt.Errorf("watchfeed: scan the index: %w", err)
	}
	for len(rows) > 0 {
		minute := rows[0].PartitionKey[:min(len(rows[0].PartitionKey), minuteKeyLen)]
		n := 1
		for n < len(rows) && rows[n].PartitionKey[:min(len(rows[n].PartitionKey), minuteKeyLen)] == minute {
			n++
		}
		// Within a partition rows run newest first (inverted ticks); a
		// minute's shards are merged here.
		batch := rows[:n]
		rows = rows[n:]
		slices.SortFunc(batch, func(a, b images.IndexRow) int {
			return cmp.Or(cmp.Compare(b.RowKey, a.RowKey), cmp.Compare(a.CameraID, b.CameraID))
		})
		imgs := make([]*images.Image, len(batch))
		if err := inParallel(ctx, len(batch), func(ctx context.Context, i int) error {
			img, err := f.indexedImage(ctx, batch[i])
			switch {
			case errors.Is(err, store.ErrNotFound):
				return nil
			case err != nil:
				return err
			}
			imgs[i] = &img
			return nil
		}); err != nil {
			return err
		}
		for _, img := range imgs {
			if img == nil {
				continue
			}
			if err := emit(*img); err != nil {
				return err
			}
		}
	}
	return nil
}
