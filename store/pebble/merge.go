package pebble

import (
	"io"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// concatenate is the engine's merger: it concatenates the operands of a
// key, oldest first, as Pebble's default merger does, in time linear in
// their size. The default prepends each older operand to a new copy of all
// it holds, so reading a key of n unflushed operands (a tally's records)
// costs n² bytes copied.
//
// The name stays the default's: a store records its merger's name in its
// OPTIONS file and in every sstable, and refuses to open under another.
// The output is byte for byte the default's, so the name is still honest.
var concatenate = &pebbledb.Merger{
	Name: "pebble.concatenate",
	Merge: func(_, value []byte) (pebbledb.ValueMerger, error) {
		return &concatMerger{buf: append([]byte(nil), value...)}, nil
	},
}

// concatMerger holds the first operand and the newer ones in buf, oldest
// first, and the older ones in older in the order received (newest first),
// ends marking where each ends; Finish puts them in order once.
type concatMerger struct {
	buf   []byte
	older []byte
	ends  []int
}

func (m *concatMerger) MergeNewer(value []byte) error {
	m.buf = append(m.buf, value...)
	return nil
}

func (m *concatMerger) MergeOlder(value []byte) error {
	m.older = append(m.older, value...)
	m.ends = append(m.ends, len(m.older))
	return nil
}

func (m *concatMerger) Finish(bool) ([]byte, io.Closer, error) {
	if len(m.ends) == 0 {
		return m.buf, nil, nil
	}
	out := make([]byte, 0, len(m.older)+len(m.buf))
	for i := len(m.ends) - 1; i >= 0; i-- {
		start := 0
		if i > 0 {
			start = m.ends[i-1]
		}
		out = append(out, m.older[start:m.ends[i]]...)
	}
	return append(out, m.buf...), nil, nil
}
