package storetest

import (
	"testing"

	"github.com/metadatad/metadatad/store"
)

// Harness opens a fresh, empty backend for one test; the backend is closed by
// t.Cleanup registered by the harness. The suite calls it once per subtest so
// that no subtest sees another's entities.
type Harness func(t *testing.T) store.Backend

// Run runs the whole conformance suite against the backends newBackend opens,
// one named subtest per part of the contract, so that a failure names the
// rule it breaks and -run can select one part.
func Run(t *testing.T, newBackend Harness) {
	parts := []struct {
		name string
		test func(*testing.T, Harness)
	}{
		{"TableNames", testTableNames},
		{"InsertGet", testInsertGet},
		{"Keys", testKeys},
		{"EntityLimits", testEntityLimits},
		{"Refusals", testRefusals},
		{"Upsert", testUpsert},
		{"WriteResults", testWriteResults},
		{"Update", testUpdate},
		{"Delete", testDelete},
		{"Query", testQuery},
		{"Scan", testScan},
		{"Batch", testBatch},
		{"Transactor", testTransactor},
		{"Counter", testCounter},
		{"Walk", testWalk},
		{"CancelledContext", testCancelledContext},
		{"Concurrency", testConcurrency},
	}
	for _, p := range parts {
		t.Run(p.name, func(t *testing.T) { p.test(t, newBackend) })
	}
}
