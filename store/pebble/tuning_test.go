package pebble

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestEngineTuning: the engine runs with this workload's options, not
// Pebble's test-sized defaults, and a new store is at the pinned format.
func TestEngineTuning(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		cache    int64
		memtable uint64
	}{
		{"defaults", Options{}, DefaultCacheSize, DefaultMemTableSize},
		{"operator sizes", Options{CacheSize: 1 << 30, MemTableSize: 8 << 20}, 1 << 30, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts.withDefaults()
			o := engineOptions(opts, newEngineWatch(opts, newFailStop(opts)))
			if o.CacheSize != tc.cache || o.MemTableSize != tc.memtable {
				t.Errorf("cache %d, memtable %d; want %d, %d", o.CacheSize, o.MemTableSize, tc.cache, tc.memtable)
			}
			if o.MemTableStopWritesThreshold != memTablesQueued {
				t.Errorf("memtables queued %d, want %d", o.MemTableStopWritesThreshold, memTablesQueued)
			}
			for i, level := range o.Levels {
				if level.FilterPolicy == nil || level.FilterPolicy.Name() != "rocksdb.BuiltinBloomFilter" {
					t.Errorf("level %d has no Bloom filter: %v", i, level.FilterPolicy)
				}
				if level.BlockSize != blockSize {
					t.Errorf("level %d's blocks are %d bytes, want %d: scans pay per block", i, level.BlockSize, blockSize)
				}
			}
			if lower, upper := o.CompactionConcurrencyRange(); lower != 1 || upper != 1 {
				t.Errorf("compactions at once %d to %d, want 1: reclaiming a purge's ranges would take more cores from requests", lower, upper)
			}
			if o.WALMinSyncInterval != nil {
				t.Error("a WAL minimum sync interval would delay a lone create's fsync")
			}
			if o.FormatMajorVersion != formatVersion {
				t.Errorf("format %s, want the pinned %s", o.FormatMajorVersion, formatVersion)
			}
		})
	}
	d, err := Open(Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.db.FormatMajorVersion(); got != formatVersion {
		t.Fatalf("a new store is at format %s, want the pinned %s", got, formatVersion)
	}
}
