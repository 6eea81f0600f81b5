// Package drivers picks the retention engine's driver for a backend: the
// embedded store's own (package embedded) for a store.Purger, which
// deletes by range in atomic batches, and the queue design (package
// queue) for a backend with neither (Azure). It is the one place that
// knows both, so that the engine imports neither.
package drivers

import (
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// For is the driver backend purges with; q tunes the queue design, which
// the embedded store's purge has no use for.
func For(backend store.Backend, q queue.Options) retention.NewDriver {
	if _, ok := backend.(store.Purger); ok {
		return embedded.New
	}
	return queue.New(q)
}
