package pebble

// MemTableRangeDels exposes the cap on a memtable's range tombstones.
const MemTableRangeDels = memTableRangeDels
