package fleet

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/metadatad/metadatad/store"
)

// copyWriters bounds the camera rows CopyCameras writes at once: each row
// is its own partition, so on Azure each is a round trip of its own.
const copyWriters = 16

// CopyCameras writes the camera table of a store copied from the embedded
// store (metadatad copy to Azure), which keeps no camera table: a row per
// partition of the primary table, with the exact first and latest captures
// of its oldest and newest rows (PartitionEnds), written over any row
// there, as the copy writes every other row. It returns the rows written.
// Run again, it writes the same rows.
func CopyCameras(ctx context.Context, from Embedded, primary string, to store.Table) (int64, error) {
	var written atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyWriters)
	err := from.PartitionEnds(gctx, primary, "", func(camera, newest, oldest string) (bool, error) {
		first, latest, ok := endsOf(newest, oldest)
		if !ok {
			return true, nil // not an image partition
		}
		g.Go(func() error {
			if _, err := to.Upsert(gctx, cameraEntity(camera, first, latest), store.Replace); err != nil {
				return err
			}
			written.Add(1)
			return nil
		})
		return true, nil
	})
	if werr := g.Wait(); werr != nil {
		err = werr // the write that failed, not the scan it cancelled
	}
	return written.Load(), err
}
