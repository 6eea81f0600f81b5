package retention_test

import (
	"os"
	"testing"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/queue"
	"github.com/metadatad/metadatad/store/retention/retentiontest"
)

// The engine's own tests, those that reach inside it (export_test.go),
// run on the conformance suite's fixtures with each design (the suite
// itself runs in the drivers' packages).
var (
	pebbleHarness = retentiontest.Harness{Name: "pebble", Backend: retentiontest.Pebble,
		Driver: func(queue.Options, *queue.Hooks) retention.NewDriver { return embedded.New }}
	pebbleQueueHarness = retentiontest.Harness{Name: "pebble-queue", Backend: retentiontest.Pebble, Driver: queue.WithHooks, Queue: true}
	azureHarness       = retentiontest.Harness{Name: "azure", Backend: retentiontest.Azure, Driver: queue.WithHooks, Queue: true}
)

type fixture = retentiontest.Fixture

// The suite's fixture's values, by the names the tests use.
const (
	cameras       = retentiontest.Cameras
	keptPerCamera = retentiontest.KeptPerCamera
	patience      = retentiontest.Patience
	policyDays    = retentiontest.PolicyDays
)

var (
	base, cutoff  = retentiontest.Base, retentiontest.Cutoff
	quickOptions  = retentiontest.QuickOptions
	policyOptions = retentiontest.PolicyOptions
	wantCounts    = retentiontest.WantCounts
	expiredCounts = retentiontest.ExpiredCounts
	cameraNames   = retentiontest.CameraNames
	expired       = retentiontest.Expired
	partitionRows = retentiontest.PartitionRows
	captured      = retentiontest.Captured
	stores        = []retentiontest.Harness{pebbleHarness, azureHarness}
)

type (
	census        = retentiontest.Census
	hookedBackend = retentiontest.HookedBackend
)

// forEachStore runs test on each backend with the driver the daemon runs on it.
func forEachStore(t *testing.T, test func(t *testing.T, open func(*testing.T, retentiontest.Options) *fixture)) {
	forEachOf(t, test, stores...)
}

// forEachOf runs test on each harness, opened afresh per test.
func forEachOf(t *testing.T, test func(t *testing.T, open func(*testing.T, retentiontest.Options) *fixture), hs ...retentiontest.Harness) {
	for _, h := range hs {
		t.Run(h.Name, func(t *testing.T) {
			test(t, func(t *testing.T, opts retentiontest.Options) *fixture { return retentiontest.Open(t, h, opts) })
		})
	}
}

// forEachQueueStore runs test on the queue design on both backends.
func forEachQueueStore(t *testing.T, test func(t *testing.T, open func(*testing.T, retentiontest.Options) *fixture)) {
	forEachOf(t, test, pebbleQueueHarness, azureHarness)
}

// newBubbleFixture opens a fixture on Pebble, with the queue design or
// the embedded driver, for a test in a synctest bubble.
func newBubbleFixture(t *testing.T, opts retentiontest.Options, queueDesign bool) *fixture {
	t.Helper()
	if queueDesign {
		return retentiontest.OpenInBubble(t, pebbleQueueHarness, opts)
	}
	return retentiontest.OpenInBubble(t, pebbleHarness, opts)
}

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }
