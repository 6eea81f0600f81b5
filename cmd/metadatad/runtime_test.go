package main

import (
	"runtime/debug"
	"testing"
)

// TestTuneRuntime: the daemon sets its garbage collector's target unless
// GOGC is set, which the operator's setting wins.
func TestTuneRuntime(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	for _, tc := range []struct {
		gogc string
		want int
		set  bool
	}{
		{"", defaultGCPercent, true},
		{"50", 100, false},
		{"off", 100, false},
	} {
		debug.SetGCPercent(100)
		pct, set := tuneRuntime(func(name string) string {
			if name == "GOGC" {
				return tc.gogc
			}
			return ""
		})
		if got := debug.SetGCPercent(100); got != tc.want || set != tc.set || (set && pct != tc.want) {
			t.Errorf("GOGC=%q: the collector's target is %d (reported %d, set %v), want %d (set %v)", tc.gogc, got, pct, set, tc.want, tc.set)
		}
	}
}
