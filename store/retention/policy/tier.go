package policy

import (
	"fmt"
	"time"
)

// Days is the one meaning of "n days" in retention, for a policy's days
// and tiers, StartPurge's retention_days and the built-in schedule alike:
// n times 24 hours, on no calendar, so that "30 days ago" is the same
// instant whatever the time zone and across a daylight-saving change.
func Days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// Tier is one step of a kind's thinning: past AfterDays, a camera keeps
// one image of the kind per KeepOnePer, up to UntilDays.
type Tier struct {
	// AfterDays is the age, in days, from which the tier thins.
	AfterDays int
	// KeepOnePer is the interval of which one image is kept: whole minutes
	// dividing a day, so that every day starts an interval.
	KeepOnePer time.Duration
	// UntilDays is the age the tier thins up to; 0 means up to the kind's
	// retention days, or for ever when the policy gives it none.
	UntilDays int
}

// MaxTiers bounds a kind's tiers: a purge resolves each camera's.
const MaxTiers = 8

// MaxDays is the most days a policy may keep a kind, or a tier reach.
const MaxDays = 100_000

// TierProblem is what is wrong with one field of a kind's tiers: Tier is
// the tier's index, -1 for the list itself; Field is "after_days",
// "keep_one_per" or "until_days", empty for the whole tier or list.
type TierProblem struct {
	Tier    int
	Field   string
	Problem string
}

// CheckTiers checks a kind's tiers against each other and its retention
// days (0: none), with floor the fewest days a tier may start at.
func CheckTiers(days int, tiers []Tier, floor int) []TierProblem {
	var out []TierProblem
	add := func(i int, field, format string, args ...any) {
		out = append(out, TierProblem{Tier: i, Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if len(tiers) > MaxTiers {
		add(-1, "", "at most %d tiers", MaxTiers)
		return out
	}
	floor = max(floor, 1)
	for i, t := range tiers {
		switch {
		case t.AfterDays < floor:
			add(i, "after_days", "must be at least %d", floor)
		case t.AfterDays > MaxDays:
			add(i, "after_days", "must be at most %d", MaxDays)
		case days > 0 && t.AfterDays >= days:
			add(i, "after_days", "must be less than the type's retention days (%d)", days)
		case i > 0 && tiers[i-1].UntilDays != 0 && t.AfterDays < tiers[i-1].UntilDays:
			add(i, "after_days", "must be at least the previous tier's until_days (%d)", tiers[i-1].UntilDays)
		}
		if !ValidInterval(t.KeepOnePer) {
			add(i, "keep_one_per", "must be whole minutes that divide a day, from 1m to 24h")
		}
		switch {
		case t.UntilDays < 0:
			add(i, "until_days", "must not be negative")
		case t.UntilDays == 0 && i < len(tiers)-1:
			add(i, "until_days", "must be set on every tier but the last (0 means open-ended)")
		case t.UntilDays != 0 && t.UntilDays <= t.AfterDays:
			add(i, "until_days", "must be 0 or more than after_days (%d)", t.AfterDays)
		case days > 0 && t.UntilDays > days:
			add(i, "until_days", "must be at most the type's retention days (%d)", days)
		case t.UntilDays > MaxDays:
			add(i, "until_days", "must be at most %d", MaxDays)
		}
	}
	return out
}

// ValidInterval reports whether d can be a tier's KeepOnePer: whole
// minutes, so that a day's tally (kept per minute) tells each interval's
// rows, dividing a day, so that every day starts an interval.
func ValidInterval(d time.Duration) bool {
	return d >= time.Minute && d%time.Minute == 0 && (24*time.Hour)%d == 0
}
