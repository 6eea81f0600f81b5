package testwait_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/testwait"
)

func TestUntilReturnsOnceCheckHolds(t *testing.T) {
	calls := 0
	testwait.Until(t, time.Minute, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("check called %d times, want 3", calls)
	}
}

// failing records a Fatalf instead of ending the test.
type failing struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *failing) Helper() {}

func (f *failing) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	panic(f)
}

func TestUntilFailsWithTheLastErrorOnceWithinHasPassed(t *testing.T) {
	f := &failing{TB: t}
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("Until did not fail the test: %v", r)
			}
		}()
		testwait.Until(f, 50*time.Millisecond, func() error { return errors.New("never") })
	}()
	if !strings.Contains(f.msg, "never") {
		t.Fatalf("failure %q does not name check's error", f.msg)
	}
}
