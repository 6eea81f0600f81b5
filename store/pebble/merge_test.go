package pebble

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// TestConcatenateMatchesDefault: the merger gives what Pebble's default
// gives, under the same name, for any operands fed either way.
func TestConcatenateMatchesDefault(t *testing.T) {
	if concatenate.Name != pebbledb.DefaultMerger.Name {
		t.Fatalf("name %q, want the default's %q", concatenate.Name, pebbledb.DefaultMerger.Name)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		n := rng.IntN(20)
		ops := make([][]byte, n+1)
		for j := range ops {
			ops[j] = make([]byte, rng.IntN(5))
			for k := range ops[j] {
				ops[j][k] = byte(rng.IntN(256))
			}
		}
		older := rng.IntN(2) == 0
		got, err := mergeAll(concatenate, ops, older)
		if err != nil {
			t.Fatal(err)
		}
		want, err := mergeAll(pebbledb.DefaultMerger, ops, older)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d (older %v): %x, want %x", i, older, got, want)
		}
	}
}

// mergeAll merges the operands, given newest first when older is set.
func mergeAll(m *pebbledb.Merger, ops [][]byte, older bool) ([]byte, error) {
	first := ops[0]
	if older {
		first = ops[len(ops)-1]
	}
	vm, err := m.Merge(nil, first)
	if err != nil {
		return nil, err
	}
	for j := 1; j < len(ops); j++ {
		if older {
			err = vm.MergeOlder(ops[len(ops)-1-j])
		} else {
			err = vm.MergeNewer(ops[j])
		}
		if err != nil {
			return nil, err
		}
	}
	out, _, err := vm.Finish(true)
	return bytes.Clone(out), err
}

// BenchmarkMergeOlder reads a key of many 2-byte operands, fed older as
// an iterator reading backwards does: per operand, the time stays flat as
// their number grows for concatenate, and grows with it for the default.
func BenchmarkMergeOlder(b *testing.B) {
	for _, m := range []*pebbledb.Merger{concatenate, pebbledb.DefaultMerger} {
		for _, n := range []int{1000, 10000, 100000} {
			name := "concatenate"
			if m == pebbledb.DefaultMerger {
				name = "default"
				if n > 10000 {
					continue
				}
			}
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				ops := make([][]byte, n)
				for i := range ops {
					ops[i] = []byte{byte(i >> 8), byte(i)}
				}
				for b.Loop() {
					if _, err := mergeAll(m, ops, true); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestConcatenateIsLinear counts the allocations of a merge of many
// operands fed older: about 2 log2(n) as appends double their buffers,
// where the default allocates (and copies all it holds) once per operand.
func TestConcatenateIsLinear(t *testing.T) {
	const n = 100000
	ops := make([][]byte, n)
	for i := range ops {
		ops[i] = []byte{byte(i >> 8), byte(i)}
	}
	allocs := testing.AllocsPerRun(1, func() {
		vm, _ := concatenate.Merge(nil, ops[0])
		for _, op := range ops[1:] {
			_ = vm.MergeOlder(op)
		}
		_, _, _ = vm.Finish(true)
	})
	// AllocsPerRun counts the whole process's allocations, so the
	// goroutines earlier tests left winding down add a few: the bound is
	// far above 2 log2(n) and far below the n of an allocation per operand.
	if allocs > n/100 {
		t.Fatalf("%v allocations for %d operands, want about 2 log2(n)", allocs, n)
	}
}
