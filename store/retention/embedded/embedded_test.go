package embedded_test

import (
	"testing"

	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/queue"
	"github.com/metadatad/metadatad/store/retention/retentiontest"
)

// TestConformance runs the retention suite on the embedded driver, on
// Pebble in memory: the store it runs on in the daemon.
func TestConformance(t *testing.T) {
	retentiontest.Run(t, retentiontest.Harness{
		Name:    "pebble",
		Backend: retentiontest.Pebble,
		Driver:  func(queue.Options, *queue.Hooks) retention.NewDriver { return embedded.New },
	})
}
