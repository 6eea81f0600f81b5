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

// locks keeps a write's condition and its commit together: a write (apply)
// holds the stripe of each key it touches, so no other write of that key
// slips between its read and its commit. A holder takes its stripes in
// ascending order, so no two holders wait for each other. (Deletes that
// remove rows they never read, the purge's range deletions, run under the
// exclusive gate instead; see purge.go.)
type locks struct {
	seed maphash.Seed
	keys [lockStripes]sync.Mutex
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

// lockKeys locks the keys, encoded by encodeKey; the function it returns
// unlocks them.
func (l *locks) lockKeys(keys [][]byte) (unlock func()) {
	ks := l.stripes(keys)
	for _, s := range ks {
		l.keys[s].Lock()
	}
	return func() {
		for _, s := range ks {
			l.keys[s].Unlock()
		}
	}
}
