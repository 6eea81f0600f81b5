package retentiontest

import (
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
)

// What the engine's own tests in store/retention share with the suite:
// they reach inside the engine (its export_test.go), so they cannot be
// scenarios here, but they seed and check the same fixture.

// Fixture's images: Cameras cameras, KeptPerCamera images each at or after
// Cutoff; Base is the first capture.
const (
	Cameras       = cameras
	KeptPerCamera = keptPerCamera
	// Patience bounds a test's wait for what should take well under a
	// second.
	Patience = patience
	// PolicyDays is PolicyOptions' default retention.
	PolicyDays = policyDays
)

// Base and Cutoff are the fixture's first capture and a purge's cutoff.
var Base, Cutoff = base, cutoff

// QuickOptions make redeliveries and polls fast enough for tests.
func QuickOptions() Options { return quickOptions() }

// PolicyOptions are QuickOptions for purges by policy, and the time they
// run at.
func PolicyOptions() (Options, time.Time) { return policyOptions() }

// WantCounts fails t unless got is want.
func WantCounts(t *testing.T, what string, got, want retention.Counts) {
	t.Helper()
	wantCounts(t, what, got, want)
}

// ExpiredCounts are a purge's counts of the fixture's expired rows in
// that many kinds.
func ExpiredCounts(kinds int) retention.Counts { return expiredCounts(kinds) }

// CameraNames are the cameras of a policy's days, sorted.
func CameraNames(days map[string]int) []string { return cameraNames(days) }

// Expired is how many rows the cameras of days lose to a purge by policy.
func Expired(days map[string]int) int64 { return expired(days) }

// PartitionRows reads the rows of one partition of tbl.
func PartitionRows(t *testing.T, tbl store.Table, partitionKey string) []store.Entity {
	t.Helper()
	return partitionRows(t, tbl, partitionKey)
}

// Captured is when the image behind a primary or index row was captured.
func Captured(t *testing.T, e store.Entity) time.Time {
	t.Helper()
	return captured(t, e)
}
