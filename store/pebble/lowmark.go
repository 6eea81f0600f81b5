package pebble

import (
	"hash/maphash"
	"sync"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// Low marks let a create skip its existence read. A camera's new image
// has the newest capture time, so its row key, inverted ticks, sorts below
// every key its partition holds: an insert below the lowest key the
// partition has held since its mark was made cannot collide with one.
// The read it saves is most of a create's engine time.
//
// A partition's mark is its lowest row key: read once, from the store, by
// the first insert that needs it, and lowered by every commit of a row of
// the partition before it releases the row's lock stripe. So for an insert
// holding its key's stripe, every row that could equal its key either
// committed before the mark's read (and the read saw it) or committed
// since (and lowered the mark), and a key below the mark is absent.
// Deletes leave the mark as it is, which only makes it lower than it need
// be. Marks live only in memory: a restart reads them again, so a create
// retried after a crash meets its row and answers as a retry.
//
// Only tallied tables, the image primary tables, keep marks: their rows
// are written only through apply (the purge only deletes them), so no
// write can put a row without lowering its mark.
//
// The marks held are bounded (maxLowMarks), whatever the fleet: past the
// bound, each new mark drops one not used since the hand of its shard last
// passed it (the clock, or second-chance, approximation of least recently
// used). A dropped mark only costs one existence read: the partition's
// next insert makes a new mark, which reads the store, and a mark once
// dropped never returns to the map. So the mark an insert finds, holding
// its key's stripe, was either in the map when the last commit of its key
// lowered the mark then held, and is that mark, or was made after that
// commit and reads it. A writer that took a mark just before it was
// dropped checks its own key against it: the commits the mark misses
// from then on hold other stripes, so other keys.

// lowMarkShards spreads the marks' map over locks, so that creates of
// different cameras rarely meet on one.
const lowMarkShards = 64

// maxLowMarks bounds the marks a store holds, at about 150 bytes each
// some 20 MiB: a camera and image type each, for fleets of 40,000 cameras
// of three types; a larger fleet's creates read more often.
const maxLowMarks = 1 << 17

// lowMarks are the marks by partition prefix (see partitionPrefix).
type lowMarks struct {
	seed   maphash.Seed
	shards [lowMarkShards]lowMarkShard
}

// lowMarkShard holds up to size marks: marks by prefix, and ring, the same
// marks in the order hand visits them to find one to drop.
type lowMarkShard struct {
	mu    sync.Mutex
	size  int
	marks map[string]*lowMark
	ring  []*lowMark
	hand  int
}

// lowMark is one partition's: low is meaningful once lowered is set, and
// read once the store's lowest key has been read into it. prefix and used
// belong to its shard, under the shard's lock.
type lowMark struct {
	prefix string
	used   bool

	mu      sync.Mutex
	read    bool
	lowered bool
	low     string
}

// newLowMarks holds up to limit marks (0: maxLowMarks), at least one a
// shard.
func newLowMarks(limit int) *lowMarks {
	if limit <= 0 {
		limit = maxLowMarks
	}
	m := &lowMarks{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].size = max(1, limit/lowMarkShards)
		m.shards[i].marks = map[string]*lowMark{}
	}
	return m
}

// mark is the partition's mark, made if new.
func (m *lowMarks) mark(prefix []byte) *lowMark {
	s := &m.shards[maphash.Bytes(m.seed, prefix)%lowMarkShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if mk := s.marks[string(prefix)]; mk != nil {
		mk.used = true
		return mk
	}
	mk := &lowMark{prefix: string(prefix)}
	if len(s.ring) < s.size {
		s.ring = append(s.ring, mk)
	} else {
		for s.ring[s.hand].used {
			s.ring[s.hand].used = false
			s.hand = (s.hand + 1) % len(s.ring)
		}
		delete(s.marks, s.ring[s.hand].prefix)
		s.ring[s.hand] = mk
		s.hand = (s.hand + 1) % len(s.ring)
	}
	s.marks[mk.prefix] = mk
	return mk
}

// held is how many marks are held.
func (m *lowMarks) held() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.marks)
		s.mu.Unlock()
	}
	return n
}

// below reports whether rowKey sorts below every row key the partition
// holds; it reads the partition's lowest key the first time. The caller
// holds the lock stripe of the row.
func (d *DB) below(prefix []byte, rowKey string) (bool, error) {
	mk := d.lowMarks.mark(prefix)
	mk.mu.Lock()
	read, lowered, low := mk.read, mk.lowered, mk.low
	mk.mu.Unlock()
	if !read {
		lowest, found, err := d.lowestRowKey(prefix)
		if err != nil {
			return false, err
		}
		mk.mu.Lock()
		// Commits since the read began lowered the mark meanwhile: keep the
		// lower of the two.
		if found && (!mk.lowered || lowest < mk.low) {
			mk.low, mk.lowered = lowest, true
		}
		mk.read = true
		lowered, low = mk.lowered, mk.low
		mk.mu.Unlock()
	}
	return !lowered || rowKey < low, nil
}

// lower records a committed row of the partition; the caller still holds
// the row's lock stripe.
func (d *DB) lower(prefix []byte, rowKey string) {
	mk := d.lowMarks.mark(prefix)
	mk.mu.Lock()
	if !mk.lowered || rowKey < mk.low {
		mk.low, mk.lowered = rowKey, true
	}
	mk.mu.Unlock()
}

// lowestRowKey is the partition's lowest row key, if it holds any.
func (d *DB) lowestRowKey(prefix []byte) (string, bool, error) {
	iter, err := d.db.NewIter(&pebbledb.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return "", false, engineError("iterate", err)
	}
	defer iter.Close()
	if !iter.First() {
		if err := iter.Error(); err != nil {
			return "", false, engineError("iterate", err)
		}
		return "", false, nil
	}
	return string(iter.Key()[len(prefix):]), true, nil
}
