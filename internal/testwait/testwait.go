// Package testwait waits in tests for what a real process, file or server
// does in its own time, where the wait cannot be virtual (testing/synctest
// covers the rest): bounded, so a condition that never holds fails the
// test instead of hanging it, and polled often enough to cost little.
package testwait

import (
	"testing"
	"time"
)

// Until calls check every 20 ms until it returns nil, and fails the test
// with check's last error once within has passed.
func Until(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %s: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
