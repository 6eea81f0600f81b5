package main

import "runtime/debug"

// defaultGCPercent is the garbage collector's target when GOGC is unset.
// Go's default, 100, collects a heap of a few tens of MiB (the engine's
// cache and memtables live outside it) many times a second under creates;
// at 400, measured on two cores with the daemon's defaults, creates ran
// 1.05-1.12x faster at 16 clients and 1.2x at 64, for 20 MiB more peak
// resident memory (85 to 105 MiB). GOMEMLIMIT still caps the heap: the
// collector runs earlier whenever the limit comes near.
const defaultGCPercent = 400

// tuneRuntime sets the runtime settings the environment leaves unset (GOGC
// set, even to Go's default, wins) and reports what it set.
func tuneRuntime(getenv func(string) string) (gcPercent int, set bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent, true
}
