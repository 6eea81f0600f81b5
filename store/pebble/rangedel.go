package pebble

import pebbledb "github.com/cockroachdb/pebble/v2"

// memTableRangeDels is how many range tombstones the memtable may collect
// before it is flushed. Every read that follows a new range tombstone makes
// Pebble re-fragment all of the memtable's tombstones into a fresh list
// (its keySpanCache), so without a cap a purge's one tombstone per camera
// costs memory and time in proportion to the fleet: 20,000 cameras held
// 3 MiB of fragments, and each of those reads walked all 20,000. A
// memtable flush moves the tombstones into an sstable, where they cost
// nothing until read. At this cap the fragments stay under about 1 MiB and
// a purge of 100,000 cameras flushes about 25 times, each a memtable that
// would have been flushed soon anyway.
const memTableRangeDels = 8192

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
