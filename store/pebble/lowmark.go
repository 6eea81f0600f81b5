package pebble

import (
	"hash/maphash"
	"sync"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// Low marks let a create skip its existence read. A camera's new image
// has the newest capture time, so its row key, inverted ticks, sorts below
// every key its partition holds: an insert below the lowest key the
// partition has held since this process started cannot collide with one.
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

// lowMarkShards spreads the marks' map over locks, so that creates of
// different cameras rarely meet on one.
const lowMarkShards = 64

// lowMarks are the marks by partition prefix (see partitionPrefix).
type lowMarks struct {
	seed   maphash.Seed
	shards [lowMarkShards]struct {
		mu    sync.Mutex
		marks map[string]*lowMark
	}
}

// lowMark is one partition's: low is meaningful once lowered is set, and
// read once the store's lowest key has been read into it.
type lowMark struct {
	mu      sync.Mutex
	read    bool
	lowered bool
	low     string
}

func newLowMarks() *lowMarks {
	m := &lowMarks{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].marks = map[string]*lowMark{}
	}
	return m
}

// mark is the partition's mark, made if new.
func (m *lowMarks) mark(prefix []byte) *lowMark {
	s := &m.shards[maphash.Bytes(m.seed, prefix)%lowMarkShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	mk := s.marks[string(prefix)]
	if mk == nil {
		mk = &lowMark{}
		s.marks[string(prefix)] = mk
	}
	return mk
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
