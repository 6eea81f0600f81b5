package pebble

import pebbledb "github.com/cockroachdb/pebble/v2"

// memTableRangeDels is how many range tombstones the memtable may collect
// before it is flushed. Every read that follows a new range tombstone makes
// Pebble re-fragment all of the memtable's tombstones into a fresh list
// (its keySpanCache), so without a cap a purge's one tombstone per camera
// costs memory and time in proportion to the fleet: 20,000 cameras held
// 3 MiB of fragments, and each of those reads walked all 20,000. A
// memtable flush moves the tombstones into an sstable, where they cost
// nothing until read. The cap is low because a purge paced while requests
// are served commits a few cameras per section and fragments the
// memtable's tombstones anew after each (warmRangeDels): at a cap of 8,192
// that was four fifths of a section's CPU at 10,000 cameras, at 1,024 a
// fifth (BenchmarkPurgeInSections's profile). A purge of 10,000 cameras
// flushes about ten times, each a small memtable that would have been
// flushed soon anyway.
const memTableRangeDels = 1024

// flushRangeDels counts n range tombstones just committed and, past
// memTableRangeDels since the last time, starts a flush of the memtable
// without waiting for it. The count restarts only at these flushes, not at
// the ones a full memtable makes, so no memtable ever collects more than
// the cap.
func (d *DB) flushRangeDels(n int64) {
	if d.rangeDels.Add(n) < memTableRangeDels {
		return
	}
	d.rangeDels.Store(0)
	if _, err := d.db.AsyncFlush(); err != nil {
		d.log.Warn("pebble: flushing a memtable full of range tombstones", "err", err)
	}
}

// warmRangeDels builds the memtable's fragments of its range tombstones
// right after a commit of new ones. The first read of any key after such a
// commit builds them otherwise, and every read meanwhile waits for it: 0.5
// to 1.5 ms for a few thousand tombstones. So the purge pays it, not a
// client's read.
func (d *DB) warmRangeDels() {
	iter, err := d.db.NewIter(&pebbledb.IterOptions{LowerBound: warmKeys[0], UpperBound: warmKeys[1]})
	if err != nil {
		return // a read that fails fails again, where it is reported
	}
	iter.First()
	_ = iter.Close()
}

// warmKeys bound a range of one key, "\x00", which no table or mark
// writes: the read finds nothing and only builds the fragments.
var warmKeys = [2][]byte{{0}, {0, 0}}
