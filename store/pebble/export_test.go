package pebble

import (
	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
)

// MemTableRangeDels exposes the cap on a memtable's range tombstones.
const MemTableRangeDels = memTableRangeDels

// PointDeleteMax exposes the most rows of a camera's day deleted key by key.
var PointDeleteMax = pointDeleteRows

// SetPointDeleteMax sets the most rows of a camera's day deleted key by
// key, until the test or benchmark ends.
func SetPointDeleteMax(t interface{ Cleanup(func()) }, n int64) {
	old := pointDeleteRows
	pointDeleteRows = n
	t.Cleanup(func() { pointDeleteRows = old })
}

// RangeDels is how many range deletions the DB's purges wrote since the
// memtable's last flush for them.
func RangeDels(d *DB) int64 { return d.rangeDels.Load() }

// Flush flushes the memtable and waits for it.
func Flush(d *DB) error { return d.db.Flush() }

// MarkFileName exposes the name of the file that records the flush mark.
const MarkFileName = markFileName

// WithoutCompactions turns the engine's compactions off.
func WithoutCompactions(o Options) Options {
	o.noCompactions = true
	return o
}

// WALLayout has o find the log where Open keeps it, for tests that open the
// engine alone on the operating system's filesystem.
func WALLayout(o *pebbledb.Options) *pebbledb.Options {
	walLayout(o, vfs.Default)
	return o
}

// WALDirName and WALFileName expose the log's directory and its record.
const (
	WALDirName  = walDirName
	WALFileName = walFileName
)

// LogBesideTables opens as builds before the log's own directory did.
func LogBesideTables(o Options) Options {
	o.logBesideTables = true
	return o
}

// ErrTallied exposes the refusal of writes that would bypass a tally.
var ErrTallied = errTallied

// SetBackfillSectionRows sets how many rows a backfill section scans,
// until the test ends.
func SetBackfillSectionRows(t interface{ Cleanup(func()) }, n int) {
	old := backfillSectionRows
	backfillSectionRows = n
	t.Cleanup(func() { backfillSectionRows = old })
}

// SetBackfillAfterSection has the backfill call f after each section it
// commits, and stop if f returns false, until the test ends.
func SetBackfillAfterSection(t interface{ Cleanup(func()) }, f func() bool) {
	backfillAfterSection = f
	t.Cleanup(func() { backfillAfterSection = nil })
}

// ReadsSkipped is how many inserts skipped their existence read below a
// low mark.
func ReadsSkipped(d *DB) int64 { return d.readsSkipped.Load() }

// WithLowMarks bounds the low marks the store holds to n, at least one per
// shard (LowMarkShards).
func WithLowMarks(o Options, n int) Options {
	o.lowMarks = n
	return o
}

// LowMarksHeld is how many low marks the store holds.
func LowMarksHeld(d *DB) int { return d.lowMarks.held() }

// LowMarkShards exposes how many shards the low marks spread over.
const LowMarkShards = lowMarkShards

// HoldRow holds the lock stripe of the table's row, which a write of it
// takes after its entry and keeps to its commit, until unlock: a write of
// it is then in flight, entered and not committed.
func HoldRow(d *DB, table, partition, row string) (unlock func()) {
	own, err := d.ownTable(table)
	if err != nil {
		panic(err)
	}
	return d.locks.lockKeys([][]byte{encodeKey(own.key, partition, row)})
}

// WritesInFlight is how many writes that passed the current epoch's horizon
// (or none) are not yet committed.
func WritesInFlight(d *DB) int64 { return d.epoch.Load().writers.Load() }

// BatchCapacity is the bytes an Exclusive's batch holds room for.
func BatchCapacity(b store.PurgeBatch) int { return cap(b.(*purgeBatch).batch.Repr()) }

// MaxStageBytes exposes the most an Exclusive's batch starts with.
const MaxStageBytes = maxStageBytes
