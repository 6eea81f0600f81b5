package pebble

// MemTableRangeDels exposes the cap on a memtable's range tombstones.
const MemTableRangeDels = memTableRangeDels

// PointDeleteMax exposes the most rows of a range deleted key by key.
const PointDeleteMax = pointDeleteMax
