package retention

import (
	"slices"
	"testing"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// TestSweepRecorderChunksWithinItsMemory: the plan's recorder ends chunks
// on partition boundaries once they hold chunkRows rows, marks a chunk
// holding a row without a camera as not whole, and once its partition keys
// outgrow its memory keeps the chunks so far, ending where the sweep must
// read on.
func TestSweepRecorderChunksWithinItsMemory(t *testing.T) {
	row := func(pk, camera string) images.IndexRow {
		return images.IndexRow{Key: store.Key{PartitionKey: pk, RowKey: camera}, CameraID: camera}
	}
	t.Run("Whole", func(t *testing.T) {
		r := newSweepRecorder(7, "a", 3, 1<<20)
		for _, x := range []images.IndexRow{row("p1", "c1"), row("p1", "c2"), row("p2", "c1"), row("p2", "c2"), row("p3", ""), row("p4", "c1")} {
			r.row(x)
		}
		p := r.done("z")
		want := []plannedChunk{
			{from: "a", to: "p3", partitions: []string{"p1", "p2"}, rows: 4, whole: true},
			{from: "p3", to: "z", partitions: []string{"p3", "p4"}, rows: 2, whole: false},
		}
		if p.fence != 7 || p.to != "z" || !slices.EqualFunc(p.chunks, want, equalChunks) {
			t.Errorf("plan %+v, want fence 7, to z, chunks %+v", *p, want)
		}
	})
	t.Run("OutgrowsItsMemory", func(t *testing.T) {
		r := newSweepRecorder(7, "a", 3, 3*partitionBytes("p1"))
		for _, pk := range []string{"p1", "p2", "p3", "p4", "p5"} {
			r.row(row(pk, "c1"))
			r.row(row(pk, "c2"))
		}
		p := r.done("z")
		want := []plannedChunk{{from: "a", to: "p3", partitions: []string{"p1", "p2"}, rows: 4, whole: true}}
		if p.to != "p3" || !slices.EqualFunc(p.chunks, want, equalChunks) {
			t.Errorf("plan %+v, want chunks %+v and the rest from p3 read", *p, want)
		}
	})
}

func equalChunks(a, b plannedChunk) bool {
	return a.from == b.from && a.to == b.to && slices.Equal(a.partitions, b.partitions) && a.rows == b.rows && a.whole == b.whole
}
