package store

import (
	"testing"
	"time"
)

// FuzzInvertedTicksRowKey: every instant .NET ticks hold round-trips through
// its row key, and newer instants sort first: t1 < t2 exactly when
// rowkey(t1) > rowkey(t2).
func FuzzInvertedTicksRowKey(f *testing.F) {
	f.Add(int64(0), int64(1))
	f.Add(int64(639028512000000000), int64(639028512000000001)) // 2026-01-01, 100 ns apart
	f.Add(MaxTicks, int64(0))
	f.Add(unixEpochTicks, unixEpochTicks)
	f.Fuzz(func(t *testing.T, ticks1, ticks2 int64) {
		t1, t2 := TimeFromTicks(clampTicks(ticks1)), TimeFromTicks(clampTicks(ticks2))
		rk1, rk2 := InvertedTicksRowKey(t1), InvertedTicksRowKey(t2)
		for _, c := range []struct {
			at time.Time
			rk string
		}{{t1, rk1}, {t2, rk2}} {
			if len(c.rk) != rowKeyDigits {
				t.Fatalf("row key %q of %v is not %d digits", c.rk, c.at, rowKeyDigits)
			}
			back, err := TimeFromInvertedTicksRowKey(c.rk)
			if err != nil || !back.Equal(c.at) {
				t.Fatalf("row key %q of %v decodes to %v, %v", c.rk, c.at, back, err)
			}
		}
		if t1.Before(t2) != (rk1 > rk2) || t1.Equal(t2) != (rk1 == rk2) {
			t.Fatalf("%v vs %v: row keys %q vs %q sort the wrong way", t1, t2, rk1, rk2)
		}
	})
}

// FuzzTimeFromInvertedTicksRowKey: any string either is refused or is the
// row key of the instant it decodes to; nothing panics.
func FuzzTimeFromInvertedTicksRowKey(f *testing.F) {
	f.Add("2516925183999999999")
	f.Add("0000000000000000000")
	f.Add("9999999999999999999")
	f.Add("-000000000000000001")
	f.Add("+516925183999999999")
	f.Add("")
	f.Fuzz(func(t *testing.T, rowKey string) {
		at, err := TimeFromInvertedTicksRowKey(rowKey)
		if err != nil {
			return
		}
		if again := InvertedTicksRowKey(at); again != rowKey {
			t.Fatalf("row key %q decodes to %v, whose row key is %q", rowKey, at, again)
		}
	})
}

// clampTicks folds any int64 into the ticks .NET holds, [0, MaxTicks].
func clampTicks(ticks int64) int64 {
	if ticks < 0 {
		ticks = -(ticks + 1)
	}
	return ticks % (MaxTicks + 1)
}
