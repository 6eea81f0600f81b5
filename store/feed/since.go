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

// minuteKeyLen is the length of a capture minute's partition key, yyyyMMddHHmm,
// without the shard suffix.
const minuteKeyLen = len("200601021504")

// Since hands emit every image of cameras that the feed can have delivered
// with stamp or a later Stamp: those indexed in the minutes from stamp less
// Window and ClockSkew to Window ahead of now, minute by minute, each
// minute's in ascending capture order. Index rows whose primary row is not
// there are passed over: a tail feeds them once it lands. The caller keeps
// stamp within MaxResumeAge, which bounds the partitions read.
func (f *Feed) Since(ctx context.Context, cameras map[string]bool, stamp time.Time, emit func(images.Image) error) error {
	now := f.now()
	_, index := f.repo.Tables()
	scan := store.Scan{Partitions: store.Range{
		From: store.MinutePartitionKey(stamp.Add(-f.window - ClockSkew)),
		To:   minuteAfter(now.Add(f.window)),
	}}
	var minute string
	var rows []store.Entity
	flush := func() error {
		// Within a partition rows run newest first (inverted ticks); a
		// minute's shards are merged here.
		slices.SortFunc(rows, func(a, b store.Entity) int {
			return cmp.Or(cmp.Compare(images.IndexedRowKey(b), images.IndexedRowKey(a)), cmp.Compare(images.IndexedCamera(a), images.IndexedCamera(b)))
		})
		for _, e := range rows {
			img, err := f.repo.IndexedImage(ctx, e)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := emit(img); err != nil {
				return err
			}
		}
		rows = rows[:0]
		return nil
	}
	for {
		page, err := index.Scan(ctx, scan)
		if err != nil {
			return fmt.Errorf("feed: scan %s: %w", index.Name(), err)
		}
		for _, e := range page.Entities {
			if m := e.PartitionKey[:min(len(e.PartitionKey), minuteKeyLen)]; m != minute {
				if err := flush(); err != nil {
					return err
				}
				minute = m
			}
			if cameras[images.IndexedCamera(e)] {
				rows = append(rows, e)
			}
		}
		if page.Next == nil {
			return flush()
		}
		scan.Resume = page.Next
	}
}
