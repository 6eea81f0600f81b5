package store

import "time"

// MinTime is the earlier of a and b.
func MinTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// MaxTime is the later of a and b.
func MaxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
