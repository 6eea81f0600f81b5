package retention_test

import (
	"testing"
	"time"
)

// BenchmarkDiskPerImage measures the space images take on disk: a store of
// 100,000 expired and 100,040 live single images, compacted, then purged
// of the expired ones. It reports the data bytes per image (its primary
// and index rows, compressed, in compacted sstables), and the data left
// after the purge, without and with a compaction, against what the live
// images took before it; its time is the first compaction's.
func BenchmarkDiskPerImage(b *testing.B) {
	l := benchLayout{expired: 100_000, cameras: 40, idle: 100_000}
	var perImage, uncompacted, compacted float64
	for range b.N {
		b.StopTimer()
		s := openBenchStore(b, nil)
		now := time.Now().UTC()
		s.seed(b, l, now)
		s.run(b)
		b.StartTimer()
		if err := s.db.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		perImage = float64(s.db.DataBytes()) / float64(l.images())
		live := perImage * float64(l.kept())
		s.check(b, s.await(b, s.start(b, now, 0).ID), l, 0)
		uncompacted = float64(s.db.DataBytes()) / live
		if err := s.db.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
		compacted = float64(s.db.DataBytes()) / live
		s.close()
	}
	b.ReportMetric(perImage, "data-bytes/image")
	b.ReportMetric(uncompacted, "after-purge/live")
	b.ReportMetric(compacted, "after-purge-compacted/live")
}
