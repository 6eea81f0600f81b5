package main

import (
	"errors"
	"maps"
	"testing"
	"time"
)

var errTest = errors.New("test: failed call")

func TestWindowsCompareEqualSpansAroundThePurge(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// calls adds n calls of o started at s taking took.
	calls := func(l *callLog, o op, s float64, n int, took time.Duration, failed bool) {
		var err error
		if failed {
			err = errTest
		}
		for range n {
			l.add(o, at(s), took, err)
		}
	}
	for _, tc := range []struct {
		name             string
		purgeTo, ranTo   float64
		span, beforeFrom float64
		coveredDuring    float64
	}{
		// A purge shorter than -min-span: both windows are min-span long.
		{name: "short purge", purgeTo: 12, ranTo: 20, span: 5, beforeFrom: 5, coveredDuring: 5},
		// A longer one sets the length, and the window before grows with it.
		{name: "long purge", purgeTo: 18, ranTo: 20, span: 8, beforeFrom: 2, coveredDuring: 8},
		// A run that ended inside the window says how much it covered.
		{name: "run ended early", purgeTo: 11, ranTo: 13, span: 5, beforeFrom: 5, coveredDuring: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &callLog{}
			purgeEnd := tc.beforeFrom + 2*tc.span
			// Before: 1,000 creates of 1 ms, one failed, and 1,000 GetLatest of 1 ms.
			calls(l, opCreate, tc.beforeFrom, 999, time.Millisecond, false)
			calls(l, opCreate, 9.999, 1, time.Millisecond, true)
			calls(l, opGetLatest, tc.beforeFrom+1, 1000, time.Millisecond, false)
			// During: creates with a tail of ten at 2 ms (above the p99, within the
			// p99.9), GetLatest as before; the last at the window's very end.
			calls(l, opCreate, 10, 990, time.Millisecond, false)
			calls(l, opCreate, 10.5, 10, 2*time.Millisecond, false)
			calls(l, opGetLatest, purgeEnd-0.001, 1000, time.Millisecond, false)
			// Outside both windows: slow calls that must count nowhere.
			calls(l, opCreate, tc.beforeFrom-0.001, 50, time.Second, false)
			calls(l, opGetLatest, purgeEnd, 50, time.Second, false)

			w := l.windows(span{at(10), at(tc.purgeTo)}, 5*time.Second, span{at(0), at(tc.ranTo)})
			if w.SpanSeconds != tc.span || w.Before.CoveredSeconds != tc.span || w.During.CoveredSeconds != tc.coveredDuring {
				t.Fatalf("span %v, covered before %v, during %v; want %v, %v, %v", w.SpanSeconds, w.Before.CoveredSeconds,
					w.During.CoveredSeconds, tc.span, tc.span, tc.coveredDuring)
			}
			wantBefore := map[string]tailReport{
				"create":     {Calls: 1000, Errors: 1, P99: 1, P999: 1},
				"get_latest": {Calls: 1000, P99: 1, P999: 1},
				allOpsKey:    {Calls: 2000, Errors: 1, P99: 1, P999: 1},
			}
			wantDuring := map[string]tailReport{
				"create":     {Calls: 1000, P99: 1, P999: 2},
				"get_latest": {Calls: 1000, P99: 1, P999: 1},
				allOpsKey:    {Calls: 2000, P99: 1, P999: 2},
			}
			if !maps.Equal(w.Before.RPCs, wantBefore) || !maps.Equal(w.During.RPCs, wantDuring) {
				t.Fatalf("before %+v\nduring %+v", w.Before.RPCs, w.During.RPCs)
			}
			wantP99 := map[string]float64{"create": 1, "get_latest": 1, allOpsKey: 1}
			wantP999 := map[string]float64{"create": 2, "get_latest": 1, allOpsKey: 2}
			if !maps.Equal(w.P99Ratio, wantP99) || !maps.Equal(w.P999Ratio, wantP999) {
				t.Fatalf("ratios p99 %v, p99.9 %v", w.P99Ratio, w.P999Ratio)
			}
		})
	}
}
