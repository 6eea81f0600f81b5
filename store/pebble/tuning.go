package pebble

import (
	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// Defaults of the engine's memory, sized for a metadata service's working
// set: the index and filter blocks of every sstable, and the newest rows of
// every camera, which GetLatest and the pre-insert existence read touch.
const (
	// DefaultCacheSize is the block cache: 256 MiB.
	DefaultCacheSize = 256 << 20
	// DefaultMemTableSize is one memtable: 64 MiB.
	DefaultMemTableSize = 64 << 20
)

// memTablesQueued bounds the memtables held at once (the one taking writes
// and those waiting to be flushed): past it writes wait for a flush. With
// the default memtable size that bounds memtable memory to 256 MiB.
const memTablesQueued = 4

// blockSize is an sstable data block's size before compression: 32 KiB,
// CockroachDB's choice, where Pebble's default is 4 KiB. This workload
// reads ranges far more than lone keys: a purge's or a thinning's scan of a
// camera's days, a fleet minute, a camera's rows between two instants. A
// scan pays per block (a read from the file, a cache allocation, a
// decompression), and 32 KiB blocks made a thinning's section 1.35x
// cheaper and a purge of 10,000 settled cameras 1.3x faster, measured; the
// existence read of a create, which seeks inside one cached block, took
// 0.6 µs more (2.1 µs against 1.5 µs), a few thousandths of a create.
const blockSize = 32 << 10

// compactionsAtOnce bounds the compactions that rewrite data (see
// engineOptions).
const compactionsAtOnce = 1

// formatVersion is the on-disk format this build writes. It is pinned, not
// pebbledb.FormatNewest, so that upgrading the library never moves a data
// directory to a format an older build cannot open: moving it is a decision
// made here, in a release of its own. Stores created before the pin were
// created at FormatNewest of this same library version, which is this one.
const formatVersion = pebbledb.FormatValueSeparation

// engineOptions are Pebble's options for this workload: appends in time
// order by many cameras, each create preceded by a point read of a key that
// is almost always absent, reads of a camera's newest rows, and expiry by
// range. Pebble's defaults suit a test database (8 MB cache, 4 MB memtable).
//
// Left at their defaults on purpose: WALMinSyncInterval, which would make a
// lone create wait for the interval before its fsync (group commit already
// shares the fsync among concurrent creates); and the L0 and compaction
// thresholds, which measured no different on this workload (the compactions
// at once are pinned, below).
//
// The file system, the logger and the listener fail-stop the process (see
// failstop.go); the listener also logs each damaged file once.
func engineOptions(opts Options, watch *engineWatch) *pebbledb.Options {
	o := &pebbledb.Options{
		FormatMajorVersion: formatVersion,
		Logger:             slogLogger{l: opts.Logger, stop: watch.stop},
		EventListener: &pebbledb.EventListener{
			DataCorruption:  corruptionLog(opts.Logger),
			BackgroundError: watch.backgroundError,
			FlushEnd:        watch.flushEnd,
			CompactionEnd:   watch.compactionEnd,
			WriteStallBegin: watch.writeStallBegin,
			WriteStallEnd:   watch.writeStallEnd,
		},
		// Index and filter blocks stay cached, so the existence read of a
		// create costs no disk read and GetLatest one at most.
		CacheSize: opts.CacheSize,
		// A larger memtable means 16x fewer flushes and L0 files for the same
		// writes, hence less compaction work and shallower reads; the
		// existence read of a recent key is answered from memory.
		MemTableSize:                opts.MemTableSize,
		MemTableStopWritesThreshold: memTablesQueued,
		// Tallies are merge operands (see tally.go).
		Merger: concatenate,
		// The compactions that reclaim a purge's deleted ranges run one at a
		// time, so they take at most one core from requests, however much a
		// purge deleted: pinned, not left to the library's default (today the
		// same), so that an upgrade cannot let them take both cores.
		// Delete-only compactions, of sstables wholly under a tombstone,
		// cost next to nothing and run beside it.
		CompactionConcurrencyRange: func() (int, int) { return compactionsAtOnce, compactionsAtOnce },
	}
	for i := range o.Levels {
		// A create first reads its key, to refuse a duplicate; the key is
		// nearly always new. A Bloom filter (10 bits a key, ~1% false
		// positives) answers "absent" for an sstable without reading its
		// index or data blocks.
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		o.Levels[i].BlockSize = blockSize
	}
	o.FS = logFS{FS: opts.FS, engine: o, dir: opts.Dir, stop: watch.stop}
	return o
}
