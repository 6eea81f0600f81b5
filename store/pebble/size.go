package pebble

import "context"

// LiveBytes estimates the store's live data from Pebble's own accounting:
// the live sstables and blob files, less the bytes their point and range
// deletions will reclaim once compacted, plus what the WAL holds unflushed.
// Deleted data stays on disk until a compaction reaches it, so disk usage
// alone would show a purge's effect late, and a budget would purge again.
// The reclaim estimates come from table statistics Pebble gathers in the
// background after each flush or compaction: the estimate is settled once
// none is pending. Deletions still in the memtable count only after
// SettleDeletes.
func (d *DB) LiveBytes() (uint64, bool) {
	m := d.db.Metrics()
	stored := m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize
	garbage := m.Table.Garbage.PointDeletionsBytesEstimate + m.Table.Garbage.RangeDeletionsBytesEstimate
	live := m.WAL.Size
	if stored > garbage {
		live += stored - garbage
	}
	return live, m.Table.InitialStatsCollectionComplete && m.Table.PendingStatsCollectionCount == 0
}

// SettleDeletes flushes the memtable, so that the deletions in it reach an
// sstable whose statistics count what they reclaim.
func (d *DB) SettleDeletes(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.db.Flush(); err != nil {
		return engineError("flush", err)
	}
	d.rangeDels.Store(0)
	return nil
}
