package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Checkpoint writes a consistent point-in-time copy of the database into
// dir, which must not exist, while writes go on: Pebble links the immutable
// table files (copying them when dir is on another filesystem) and copies
// the log up to the current write (beside the tables: the copy has no wal
// directory, and Open reads the logs from there). The log is flushed and synced first, so
// every write acknowledged before the call is in the copy; writes stop only
// for the instant the engine takes the list of files.
func (d *DB) Checkpoint(dir string) error {
	if err := d.db.Checkpoint(dir, pebbledb.WithFlushedWAL()); err != nil {
		return fmt.Errorf("pebble: checkpoint into %s: %w", dir, err)
	}
	return nil
}

// Tables lists the tables that hold rows in the database in dir, by the
// name their keys carry (in lower case, as table names are
// case-insensitive), in order. It opens the database read-only, so a
// checkpoint stays exactly as it was written.
func Tables(dir string) (names []string, err error) {
	o := &pebbledb.Options{
		ReadOnly: true,
		Logger:   slogLogger{l: slog.New(slog.DiscardHandler), stop: newFailStop(Options{Dir: dir}.withDefaults())},
	}
	readOnlyWALLayout(o, vfs.Default, dir)
	db, err := pebbledb.Open(dir, o)
	if err != nil {
		return nil, engineError("open "+dir+" read-only", err)
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	// Keys below a table's name (empty names: the flush marks, the tallies'
	// records) are not rows, nor are those of the tallies, above every
	// table's (see tally.go).
	it, err := db.NewIter(&pebbledb.IterOptions{LowerBound: []byte{sep + 1}, UpperBound: []byte(tallyTablePrefix[:1])})
	if err != nil {
		return nil, engineError("iterate", err)
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	names = []string{}
	// One seek per table: past the last key of a table (name, 0x00, ...)
	// comes name followed by 0x01.
	for valid := it.First(); valid; {
		key := it.Key()
		i := bytes.IndexByte(key, sep)
		if i < 0 {
			return nil, fmt.Errorf("%w: key %q", errCorrupt, key)
		}
		name := string(key[:i])
		names = append(names, name)
		valid = it.SeekGE(append([]byte(name), sep+1))
	}
	if err := it.Error(); err != nil {
		return nil, engineError("iterate", err)
	}
	return names, nil
}
