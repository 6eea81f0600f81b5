package retention

import (
	"golang.org/x/time/rate"

	"github.com/metadatad/metadatad/store"
)

// SweepSteps are the names of the sweep's steps, in the order a chunk meets them.
func SweepSteps() []string {
	names := make([]string, len(sweepSteps))
	for i, s := range sweepSteps {
		names[i] = string(s)
	}
	return names
}

// SetSweepHook makes e call hook at every step of its sweeps, with the
// index partitions the step concerns (From empty when not yet known).
func SetSweepHook(e *Engine, hook func(step string, partitions store.Range)) {
	e.sweepHook = func(s sweepStep, partitions store.Range) { hook(string(s), partitions) }
}

// DefaultGroupSize is how many cameras a task holds by default.
const DefaultGroupSize = defaultGroupSize

// CountPacedRows makes e's pacer report the rows it asks a cap of
// perSecond to admit; the pacing itself is unchanged.
func CountPacedRows(e *Engine, count func(perSecond float64, rows int)) {
	e.reserve = func(l *rate.Limiter, n int) *rate.Reservation {
		count(float64(l.Limit()), n)
		return reserveN(l, n)
	}
}

// JobLimiters is how many per-job limiters e holds.
func JobLimiters(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobLimiters)
}

// SetMaxPrefixPolicies lowers p's cap on prefix policies, so a test
// reaches it with a few.
func SetMaxPrefixPolicies(p *Policies, n int) { p.maxPrefixes = n }
