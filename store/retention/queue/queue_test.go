package queue_test

import (
	"os"
	"testing"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store/retention/queue"
	"github.com/metadatad/metadatad/store/retention/retentiontest"
)

// TestConformance runs the retention suite on the queue design on Azurite,
// the backend it runs on in the daemon, and on Pebble in memory with the
// store's transactions and purges hidden ("pebble-queue"). That mode serves
// no user; it is the cheaper way to test this driver: a scenario on Pebble
// in memory takes milliseconds where Azurite takes seconds, it crashes at
// any write by a copy of its files, and its waits run in a synctest bubble,
// where Azurite, a real process, cannot.
func TestConformance(t *testing.T) {
	for _, h := range []retentiontest.Harness{
		{Name: "pebble-queue", Backend: retentiontest.Pebble, Driver: queue.WithHooks, Queue: true},
		{Name: "azure", Backend: retentiontest.Azure, Driver: queue.WithHooks, Queue: true},
	} {
		t.Run(h.Name, func(t *testing.T) { retentiontest.Run(t, h) })
	}
}

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }
