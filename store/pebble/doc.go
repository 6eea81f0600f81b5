// Package pebble is the embedded backend of the store contract, on
// CockroachDB's Pebble LSM engine.
//
// All tables share one Pebble database. A key is the table name, the
// partition key and the row key joined by 0x00, a byte that keys may not
// hold, so byte order is (table, PartitionKey, RowKey) order and a
// partition's rows are one contiguous range: queries are range scans and a
// device's expired rows can go with one range deletion. Keys that start
// with 0x00 (an empty table name) are the store's own: the flush marks
// (flushmark.go), which with the file METADATAD-FLUSHED beside Pebble's own
// catch a MANIFEST cut short.
//
// Open makes a new store only in a missing or empty directory; one holding
// files but no MANIFEST marker is refused as damaged, where Pebble would
// start afresh and delete the tables as obsolete (db.go). The write-ahead
// log lives in the subdirectory wal, and METADATAD-WAL names its newest
// file, so that a lost or cut newest log is refused too; logs an older build
// left beside the tables are replayed from there (wal.go).
//
// A restore or a copy into a data directory marks it with the file
// METADATAD-UNFINISHED until the directory holds the whole store
// (unfinished.go). Open checks for it before anything else, so such a
// directory is never taken for an empty or a damaged store, and refuses it
// quoting the command to run again: a copy reopens its own to resume, a
// restore clears its own and starts over.
//
// A value is the entity's ETag, write time and typed properties in a
// versioned binary layout (value.go); values written in the older EDM JSON
// layout are still read.
//
// Every write is synced to the WAL before it returns. Pebble's commit
// pipeline shares one fsync among the writes that arrive while the previous
// one runs (group commit), so concurrent creates do not pay one sync each.
// Conditional writes (insert-if-absent, ETag checks) read and commit under a
// lock stripe chosen by key, so writes to different keys never wait on each
// other's sync. An insert into an image table below its partition's low
// mark, as a camera's newest image is, skips the existence read: nothing
// can be stored under its key (lowmark.go). An index table declared
// minute-keyed while empty is known to hold only this service's index key
// form until a row of another form is written (instantfirst.go), so a
// purge deletes each index row by one key, not two.
//
// An engine error the store cannot go on from ends the process with status
// 70 and one log line (failstop.go): a write-ahead log that cannot be
// created, written or synced, Pebble's own Fatalf, flushes that keep
// failing, and writes stalled while compactions keep failing (a level 0
// that cannot be emptied), the last two of which would otherwise hold
// every write back for good. Every acknowledged write is in the synced
// log, so the next start has it.
package pebble
