package pebble

import (
	"context"
)

// Compact writes the memtable out and rewrites every sstable, so that the
// space of deleted rows goes back to the filesystem now instead of when
// the engine's own compactions get to it: after the first purge of a long
// backlog, for instance. Reads and writes go on meanwhile; it takes about
// as long as copying the store.
func (d *DB) Compact(ctx context.Context) error {
	if err := d.db.Flush(); err != nil {
		return engineError("flush", err)
	}
	// Every key starts with its table's name, an ASCII identifier.
	if err := d.db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
		return engineError("compact", err)
	}
	return nil
}

// DataBytes is the space the store's data takes on disk: its live sstables
// and blob files; not the write-ahead log, whose size follows the
// memtable's, nor files that compactions replaced, which are being deleted.
func (d *DB) DataBytes() uint64 {
	m := d.db.Metrics()
	return m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize
}
