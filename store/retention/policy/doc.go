// Package policy holds the rules of retention that are the same on every
// backend and every path: what a retention policy, a legal hold and a
// thinning tier are, which rule a camera gets, and which image of a
// thinned interval is kept. It does no I/O: the store of policies and
// holds, and the purges that apply them, are package retention's and its
// backends', and each of them asks this package rather than decide again.
// That is how a rule stays one rule: a hold once came to be checked by
// some purges and not others because each path wrote its own check.
//
// # Policies, holds, tiers
//
// A Policy says, per image kind, how many days images are kept (Days:
// n times 24 hours, on no calendar) and how they are thinned before that
// (Tiers). It covers every camera (ScopeDefault), the cameras whose id
// starts with a prefix (ScopePrefix) or one camera (ScopeCamera). A Tier
// keeps, of the images aged between its AfterDays and UntilDays, one per
// KeepOnePer: whole minutes dividing a day, so that a day's tally, kept
// per minute, tells each interval's rows, and every day starts one.
// CheckTiers says what is wrong with a kind's tiers (overlaps, a tier past
// the kind's days, an interval that does not divide a day) field by field,
// so the server can name the field; Policy.Check is the store's last word.
// A Hold keeps everything of its camera, whatever its policy says, from
// every purge, thinning pass and storage budget. Holds are few (a case's
// cameras), so a purge reads them whole into a HoldSet and checks cameras
// in memory.
//
// # A camera's rule
//
// For each kind a camera gets the Rule (days and tiers together) of its own
// policy, else of its longest prefix policy, else of the default: the first
// that sets the kind, by days or by tiers (Rules). Days and tiers never mix
// across policies, so a camera policy's tiers never thin up to a prefix
// policy's days. Rules holds the default and the prefix policies, which a
// purge reads once; a camera's own policy is passed in as it is read,
// since cameras are a fleet. Rule.At turns the rule into a boundary (the
// start of the cutoff's minute, the grain of the index and the tallies)
// and Windows: per tier, the intervals wholly inside its ages at the job's
// instant. Resolve then decides, from the camera's oldest row: purge it,
// thin it, or, if it is held and either would touch it, keep it whole and
// count it as held. A purge by cutoff passes the job's boundary and no
// windows through the same Resolve, so a hold binds it too. Reaches is how
// far any policy reaches into a kind, so that a purge scans no newer index
// than some camera's rule could delete.
//
// # The keeper rule
//
// Thinning cuts a window into intervals of KeepOnePer aligned on multiples
// of KeepOnePer since year 1 (Interval: time.Time's zero, from which
// Truncate counts), and keeps one row of each: the earliest, or for a pano
// the earliest clear-day image when the interval has one (Prefer, Keeper).
// The alignment is fixed, not taken from a job's instant or a camera's
// first row, so that every pass cuts the same intervals: a second pass over
// thinned rows finds one row per interval and deletes nothing, and a crash
// mid-pass resumes into the same answer. Windows hold only whole
// intervals: one that straddles a tier's edge waits for a later pass, so
// an interval is thinned whole by one tier, never part by one tier and
// part by another or not at all. The earliest is kept because newer images
// landing in an interval never change its keeper; only a late image
// earlier than it does, and becomes the keeper at the next pass (the
// previous one goes then). A pano keeps a clear-day image first because it
// is the one clear-day queries (images.Repository) look for.
//
// Three paths thin, each through Intervals or Spans: the embedded store
// reads an interval's keys and deletes all but the keeper by range
// (store/pebble's ThinRows), the queue design on Azure reads a window's
// rows and deletes the others by key (retention's thinQueried), and the
// embedded survey counts, from a day's tally alone, what those deletes
// will take (Spans), which is exact because both apply the same rule to
// the same intervals.
package policy
