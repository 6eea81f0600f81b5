package images_test

import (
	"fmt"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// BenchmarkFilteredReads compares, on the embedded store, the filtered
// reads of a camera whose history holds no match (no clear day, no image of
// the correlation id asked for) before the pointers (a filtered query of
// the camera's partition, what List did) and after, at one day and at 30
// days of one image a minute.
func BenchmarkFilteredReads(b *testing.B) {
	for _, history := range []int{1440, 43200} {
		db := openDB(b)
		pano, pre := openRepo(b, db, images.Pano), openRepo(b, db, images.PreStitch)
		for _, r := range []*images.Repository{pano, pre} {
			primary, _ := r.Tables()
			for start := 0; start < history; start += store.MaxBatchOps {
				var ops []store.Op
				for n := start; n < min(start+store.MaxBatchOps, history); n++ {
					ops = append(ops, store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: "cam",
						RowKey: store.InvertedTicksRowKey(minute(n)), Properties: store.Properties{
							images.PropCameraID: "cam", images.PropCapturedAt: minute(n),
							images.PropIsClearDay: false, images.PropCorrelationID: fmt.Sprintf("p%d", n)}}})
				}
				if err := primary.Batch(b.Context(), ops); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, read := range []struct {
			name   string
			repo   *images.Repository
			filter images.Filter
		}{
			{"clear-day", pano, images.Filter{ClearDayOnly: true}},
			{"correlation", pre, images.Filter{CorrelationID: "none"}},
		} {
			// The first read backfills the camera's pointers.
			if _, _, err := read.repo.List(b.Context(), images.ListOptions{CameraID: "cam", Filter: read.filter, Limit: 1}); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/history=%d/before", read.name, history), func(b *testing.B) {
				primary, _ := read.repo.Tables()
				where := []store.Equal{{Property: images.PropIsClearDay, Value: true}}
				if read.filter.CorrelationID != "" {
					where = []store.Equal{{Property: images.PropCorrelationID, Value: read.filter.CorrelationID}}
				}
				for b.Loop() {
					page, err := store.FillPage(1, nil, func(resume *store.Cursor, want int) (store.Page, error) {
						return primary.Query(b.Context(), store.Query{PartitionKey: "cam", Where: where, Limit: want, Resume: resume})
					})
					if err != nil || len(page.Entities) != 0 {
						b.Fatal(len(page.Entities), err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/history=%d/after", read.name, history), func(b *testing.B) {
				for b.Loop() {
					imgs, _, err := read.repo.List(b.Context(), images.ListOptions{CameraID: "cam", Filter: read.filter, Limit: 1})
					if err != nil || len(imgs) != 0 {
						b.Fatal(len(imgs), err)
					}
				}
			})
		}
	}
}
