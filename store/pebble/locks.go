package pebble

import (
	"hash/maphash"
	"slices"
	"sync"
)

// lockStripes bounds how many conditional writes can be in flight at once
// on distinct keys; two keys rarely share a stripe, so writes rarely wait for
// a sync that is not their own.
const lockStripes = 1024

// locks keeps a write's condition and its commit together. A write (apply,
// DeleteKeys) holds the stripe of each key it touches, so no other write of
// that key slips between its read and its commit, and holds the stripe of
// each key's partition shared. DeleteRanges, which removes keys it never
// reads, holds its partitions' stripes exclusively: an Update that found a
// row cannot commit over it after a range deletion removed it.
//
// Every holder takes partition stripes before key stripes, each kind in
// ascending order, so no two holders wait for each other.
type locks struct {
	seed       maphash.Seed
	keys       [lockStripes]sync.Mutex
	partitions [lockStripes]sync.RWMutex
}

func newLocks() *locks { return &locks{seed: maphash.MakeSeed()} }

// stripes are the distinct stripes of the byte strings, in ascending order.
func (l *locks) stripes(of [][]byte) []int {
	s := make([]int, len(of))
	for i, b := range of {
		s[i] = int(maphash.Bytes(l.seed, b) % lockStripes)
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// lockKeys locks the keys, encoded by encodeKey, and their partitions,
// encoded by partitionPrefix, shared; the function it returns unlocks them.
func (l *locks) lockKeys(partitions, keys [][]byte) (unlock func()) {
	ps, ks := l.stripes(partitions), l.stripes(keys)
	for _, s := range ps {
		l.partitions[s].RLock()
	}
	for _, s := range ks {
		l.keys[s].Lock()
	}
	return func() {
		for _, s := range ks {
			l.keys[s].Unlock()
		}
		for _, s := range ps {
			l.partitions[s].RUnlock()
		}
	}
}

// lockPartitions locks the partitions, encoded by partitionPrefix,
// exclusively; the function it returns unlocks them.
func (l *locks) lockPartitions(partitions [][]byte) (unlock func()) {
	ps := l.stripes(partitions)
	for _, s := range ps {
		l.partitions[s].Lock()
	}
	return func() {
		for _, s := range ps {
			l.partitions[s].Unlock()
		}
	}
}
