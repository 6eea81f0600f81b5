package pebble

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// lockStripes bounds how many conditional writes can be in flight at once
// on distinct keys; two keys rarely share a stripe, so writes rarely wait for
// a sync that is not their own.
const lockStripes = 1024

// markSlots is how many write marks each table's fences compare (see
// locks.marks): many more than lock stripes, so that live writes to other
// partitions of the table seldom refuse a fenced deletion.
const markSlots = 1 << 14

// locks keeps a write's condition and its commit together. A write (apply,
// DeleteKeys) holds the stripe of each key it touches, so no other write of
// that key slips between its read and its commit, and holds the stripe of
// each key's partition shared. DeleteRanges, which removes keys it never
// reads, holds its partitions' stripes exclusively: an Update that found a
// row cannot commit over it after a range deletion removed it.
//
// Every holder takes partition stripes before key stripes, each kind in
// ascending order, so no two holders wait for each other.
//
// Every write also leaves a mark on its partitions for fenced deletions
// (store.RangeDeleter.Fence): after its commit, before it lets go of its
// partitions, it takes the next number of seq and raises the mark of
// each partition's slot to it. A fence is the value of seq; a partition
// whose slot's mark is above it was written since, or shares its slot with
// one that was. Each table has slots of its own: a purge writes its jobs,
// tasks and primary rows while a fence of its index is held, and slots
// shared across tables refused one fenced deletion in six for that alone.
type locks struct {
	seed       maphash.Seed
	keys       [lockStripes]sync.Mutex
	partitions [lockStripes]sync.RWMutex
	seq        atomic.Uint64
	// marks are each table's mark slots, by table key, made at its first write.
	mu    sync.RWMutex
	marks map[string]*[markSlots]atomic.Uint64
}

func newLocks() *locks {
	return &locks{seed: maphash.MakeSeed(), marks: map[string]*[markSlots]atomic.Uint64{}}
}

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
		l.mark(partitions)
		for _, s := range ks {
			l.keys[s].Unlock()
		}
		for _, s := range ps {
			l.partitions[s].RUnlock()
		}
	}
}

// lockPartitions locks the partitions, encoded by partitionPrefix,
// exclusively; the function it returns unlocks them, marking them written
// if mark is set.
func (l *locks) lockPartitions(partitions [][]byte, mark bool) (unlock func()) {
	ps := l.stripes(partitions)
	for _, s := range ps {
		l.partitions[s].Lock()
	}
	return func() {
		if mark {
			l.mark(partitions)
		}
		for _, s := range ps {
			l.partitions[s].Unlock()
		}
	}
}

// fence is the mark of every write so far.
func (l *locks) fence() uint64 { return l.seq.Load() }

// slot is the mark slot of a partition, encoded by partitionPrefix, nil
// if its table was never marked and create is unset.
func (l *locks) slot(partition []byte, create bool) *atomic.Uint64 {
	table := partition[:bytes.IndexByte(partition, sep)]
	l.mu.RLock()
	marks := l.marks[string(table)]
	l.mu.RUnlock()
	if marks == nil {
		if !create {
			return nil
		}
		l.mu.Lock()
		if marks = l.marks[string(table)]; marks == nil {
			marks = new([markSlots]atomic.Uint64)
			l.marks[string(table)] = marks
		}
		l.mu.Unlock()
	}
	return &marks[maphash.Bytes(l.seed, partition)%markSlots]
}

// mark records a write to the partitions, called while their stripes are
// still held.
func (l *locks) mark(partitions [][]byte) {
	seq := l.seq.Add(1)
	for _, p := range partitions {
		m := l.slot(p, true)
		for {
			old := m.Load()
			if old >= seq || m.CompareAndSwap(old, seq) {
				break
			}
		}
	}
}

// unchangedSince reports whether no write marked the partitions after
// fence; call it holding their stripes exclusively.
func (l *locks) unchangedSince(partitions [][]byte, fence uint64) bool {
	for _, p := range partitions {
		if m := l.slot(p, false); m != nil && m.Load() > fence {
			return false
		}
	}
	return true
}
