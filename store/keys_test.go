package store

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// Vectors shared with the .NET system: row key = 3155378975999999999 - ticks,
// ticks being 100 ns intervals since 0001-01-01T00:00:00Z. Those not taken
// from the .NET system were worked out by hand from that definition.
var rowKeyVectors = []struct {
	name string
	t    time.Time
	want string
}{
	{"from the .NET system", time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC), "2516350750799999999"},
	{"same instant in another zone", time.Date(2026, 1, 1, 1, 2, 0, 0, time.FixedZone("CET", 3600)), "2516350750799999999"},
	{"one tick later sorts first", time.Date(2026, 1, 1, 0, 2, 0, 100, time.UTC), "2516350750799999998"},
	// 1767225600 s after the Unix epoch: 621355968000000000 + 17672256000000000 ticks.
	{"start of 2026", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "2516350751999999999"},
	// 946684800 s after the Unix epoch: 630822816000000000 ticks.
	{"start of 2000", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), "2524556159999999999"},
	// The Unix epoch is 621355968000000000 ticks.
	{"Unix epoch", time.Unix(0, 0), "2534023007999999999"},
	{"DateTimeOffset.MinValue", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "3155378975999999999"},
	{"DateTimeOffset.MaxValue", time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC), "0000000000000000000"},
}

func TestInvertedTicksRowKey(t *testing.T) {
	for _, tc := range rowKeyVectors {
		t.Run(tc.name, func(t *testing.T) {
			if got := InvertedTicksRowKey(tc.t); got != tc.want {
				t.Errorf("InvertedTicksRowKey(%s) = %s, want %s", tc.t.Format(time.RFC3339Nano), got, tc.want)
			}
			got, err := TimeFromInvertedTicksRowKey(tc.want)
			if err != nil {
				t.Fatalf("TimeFromInvertedTicksRowKey(%s): %v", tc.want, err)
			}
			if !got.Equal(tc.t) || got.Location() != time.UTC {
				t.Errorf("TimeFromInvertedTicksRowKey(%s) = %s, want %s in UTC", tc.want, got.Format(time.RFC3339Nano), tc.t.UTC().Format(time.RFC3339Nano))
			}
		})
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    time.Time
		want int64
	}{
		{"zero", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{"Unix epoch", time.Unix(0, 0), 621355968000000000},
		{"max", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), MaxTicks},
		// Before the Unix epoch, truncation must still go down, not toward zero.
		{"before the Unix epoch", time.Unix(-1, 999999950), 621355968000000000 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Ticks(tc.t); got != tc.want {
				t.Errorf("Ticks(%s) = %d, want %d", tc.t.Format(time.RFC3339Nano), got, tc.want)
			}
			if got := Ticks(TimeFromTicks(tc.want)); got != tc.want {
				t.Errorf("Ticks(TimeFromTicks(%d)) = %d", tc.want, got)
			}
		})
	}
}

func TestInvertedTicksRowKeyTruncates(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)
	for _, ns := range []int{1, 50, 99} {
		if got, want := InvertedTicksRowKey(base.Add(time.Duration(ns))), InvertedTicksRowKey(base); got != want {
			t.Errorf("InvertedTicksRowKey(base + %d ns) = %s, want %s as for base", ns, got, want)
		}
	}
	if got := InvertedTicksRowKey(base.Add(100)); got >= InvertedTicksRowKey(base) {
		t.Errorf("InvertedTicksRowKey(base + 100 ns) = %s, want below %s", got, InvertedTicksRowKey(base))
	}
	got, err := TimeFromInvertedTicksRowKey(InvertedTicksRowKey(base.Add(199)))
	if err != nil || !got.Equal(base.Add(100)) {
		t.Errorf("round trip of base + 199 ns = %s, %v; want base + 100 ns", got.Format(time.RFC3339Nano), err)
	}
}

func TestTimeFromInvertedTicksRowKeyRejects(t *testing.T) {
	for _, tc := range []struct{ name, rowKey string }{
		{"empty", ""},
		{"18 digits", "251635075079999999"},
		{"20 digits", "25163507507999999990"},
		{"letters", "25163507507999999x9"},
		{"sign", "+516350750799999999"},
		{"negative", "-000000000000000001"},
		{"over MaxTicks", "3155378976000000000"},
		{"over uint64", "9999999999999999999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := TimeFromInvertedTicksRowKey(tc.rowKey); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("TimeFromInvertedTicksRowKey(%q) = %s, %v; want ErrInvalidKey", tc.rowKey, got, err)
			}
		})
	}
}

// randomInstant is a tick-aligned instant between 1601 and 9999: what the
// system stores, since a row key cannot say more than a tick.
func randomInstant(r *rand.Rand) time.Time {
	lo, hi := Ticks(minDateTime), MaxTicks
	return TimeFromTicks(lo + r.Int64N(hi-lo+1))
}

func TestInvertedTicksRowKeyProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 1))
	for range 10000 {
		a, b := randomInstant(r), randomInstant(r)
		ka, kb := InvertedTicksRowKey(a), InvertedTicksRowKey(b)
		if len(ka) != 19 {
			t.Fatalf("InvertedTicksRowKey(%s) = %q, want 19 digits", a.Format(time.RFC3339Nano), ka)
		}
		if got, err := TimeFromInvertedTicksRowKey(ka); err != nil || !got.Equal(a) {
			t.Fatalf("round trip of %s = %s, %v", a.Format(time.RFC3339Nano), got.Format(time.RFC3339Nano), err)
		}
		if a.After(b) != (ka < kb) {
			t.Fatalf("%s after %s is %t but key %s < %s is %t: newer must sort first",
				a.Format(time.RFC3339Nano), b.Format(time.RFC3339Nano), a.After(b), ka, kb, ka < kb)
		}
	}
}

func TestMinutePartitionKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    time.Time
		want string
	}{
		{"UTC, last instant of the minute", time.Date(2026, 1, 1, 0, 2, 59, 900000000, time.UTC), "202601010002"},
		{"ahead of UTC", time.Date(2026, 1, 1, 5, 32, 59, 900000000, time.FixedZone("IST", 5*3600+1800)), "202601010002"},
		{"behind UTC, previous day there", time.Date(2025, 12, 31, 19, 2, 59, 900000000, time.FixedZone("EST", -5*3600)), "202601010002"},
		{"start of the minute", time.Date(2026, 1, 1, 0, 3, 0, 0, time.UTC), "202601010003"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MinutePartitionKey(tc.t); got != tc.want {
				t.Errorf("MinutePartitionKey(%s) = %s, want %s", tc.t.Format(time.RFC3339Nano), got, tc.want)
			}
		})
	}
}

func TestInvertedTicksRows(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)
	ptr := func(t time.Time) *time.Time { return &t }
	for _, tc := range []struct {
		name       string
		start, end *time.Time
		captured   time.Time
		want       bool
	}{
		{"exactly at start", &start, &end, start, true},
		{"one tick before start", &start, &end, start.Add(-100), false},
		{"exactly at end", &start, &end, end, false},
		{"one tick before end", &start, &end, end.Add(-100), true},
		{"between", &start, &end, start.Add(time.Minute), true},
		{"no start", nil, &end, time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"no start, at end", nil, &end, end, false},
		{"no end", &start, nil, maxDateTime, true},
		{"no end, before start", &start, nil, start.Add(-100), false},
		{"no bounds", nil, nil, start, true},
		{"start equals end", &start, &start, start, false},
		{"start after end", &end, &start, start.Add(time.Minute), false},
		// Bounds finer than a tick: a stored instant is inside when it is at
		// or after start and before end.
		{"start between ticks, tick before", ptr(start.Add(50)), &end, start, false},
		{"start between ticks, tick after", ptr(start.Add(50)), &end, start.Add(100), true},
		{"end between ticks, tick before", &start, ptr(end.Add(50)), end, true},
		{"end between ticks, tick after", &start, ptr(end.Add(50)), end.Add(100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := InvertedTicksRows(tc.start, tc.end)
			if got := inRange(rows, InvertedTicksRowKey(tc.captured)); got != tc.want {
				t.Errorf("InvertedTicksRows = %+v; contains %s (%s) = %t, want %t",
					rows, tc.captured.Format(time.RFC3339Nano), InvertedTicksRowKey(tc.captured), got, tc.want)
			}
		})
	}
	if rows := InvertedTicksRows(nil, nil); rows != (Range{}) {
		t.Errorf("InvertedTicksRows(nil, nil) = %+v, want the open range", rows)
	}
}

// TestInvertedTicksRowsProperty checks over many random bounds, some finer
// than a tick, that the row range holds exactly the instants in [start, end).
func TestInvertedTicksRowsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 2))
	for range 20000 {
		start := randomInstant(r).Add(time.Duration(r.IntN(100)))
		end := start.Add(time.Duration(r.Int64N(int64(time.Hour))) - 10*time.Minute)
		startPtr, endPtr := &start, &end
		switch r.IntN(4) {
		case 0:
			startPtr = nil
		case 1:
			endPtr = nil
		}
		// Captured instants near the bounds, where off-by-one errors live.
		var captured time.Time
		switch r.IntN(4) {
		case 0:
			captured = TruncateToTicks(start).Add(time.Duration(r.IntN(5)-2) * 100)
		case 1:
			captured = TruncateToTicks(end).Add(time.Duration(r.IntN(5)-2) * 100)
		default:
			captured = TruncateToTicks(start.Add(time.Duration(r.Int64N(int64(2*time.Hour))) - time.Hour))
		}
		if captured.Before(minDateTime) || captured.After(maxDateTime) {
			continue
		}
		want := (startPtr == nil || !captured.Before(start)) && (endPtr == nil || captured.Before(end))
		rows := InvertedTicksRows(startPtr, endPtr)
		if got := inRange(rows, InvertedTicksRowKey(captured)); got != want {
			t.Fatalf("start %v, end %v, captured %s: Contains = %t, want %t (rows %+v)",
				fmtTime(startPtr), fmtTime(endPtr), captured.Format(time.RFC3339Nano), got, want, rows)
		}
	}
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "open"
	}
	return t.Format(time.RFC3339Nano)
}

// inRange reports whether k lies in r, as a backend bounds a query.
func inRange(r Range, k string) bool {
	return k >= r.From && (r.To == "" || k < r.To)
}
