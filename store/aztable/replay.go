package aztable

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/metadatad/metadatad/store"
)

// Writes are retried by azcore's retry policy when the service throttles
// (503 Server Busy), times out (500 Operation Timeout, after which the write
// may or may not have been applied) or the connection drops before the
// answer arrives. Inserts, conditional updates, deletes and batches are not
// idempotent: when the first attempt was applied and its answer lost, the
// retry fails, with 409 for an insert, 412 for an update whose ETag the first
// attempt moved on, 404 for a delete. Such an error on a retried write is
// checked against the table: if the table holds what the write leaves, the
// write counts as applied and succeeds.
//
// The check cannot tell the write's own first attempt from another writer
// that did the same in between (inserted the identical entity, deleted the
// same row); it takes either as this write. Callers of this system already
// treat an identical existing entity as success, and a purge wants the row
// gone, whoever removed it.

// attemptsKey marks a context whose requests count their attempts.
type attemptsKey struct{}

// withAttempts returns a context under which countAttempts counts every
// attempt of a request, and the counter.
func withAttempts(ctx context.Context) (context.Context, *atomic.Int32) {
	n := new(atomic.Int32)
	return context.WithValue(ctx, attemptsKey{}, n), n
}

// countAttempts is a per-retry policy: azcore runs it once for every attempt.
type countAttempts struct{}

func (countAttempts) Do(req *policy.Request) (*http.Response, error) {
	if n, ok := req.Raw().Context().Value(attemptsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	return req.Next()
}

// replayed reports whether the table holds what op leaves, and returns the
// stored entity: the check for a write whose error came on a retry.
func (t *table) replayed(ctx context.Context, op store.Op) (store.Entity, bool) {
	e := op.Entity
	stored, err := t.Get(ctx, e.PartitionKey, e.RowKey)
	var ok bool
	switch {
	case op.Kind == store.OpDelete:
		ok = errors.Is(err, store.ErrNotFound)
	case err != nil:
	case op.Kind != store.OpInsert && op.Mode == store.Merge:
		ok = holds(stored.Properties, e.Properties)
	default:
		ok = store.EqualProperties(stored.Properties, e.Properties)
	}
	return stored, ok
}

// logReplay records a write taken as applied by an earlier attempt, for the
// operator who wonders why a retried write succeeded.
func (t *table) logReplay(what string) {
	t.log.Info("aztable: a retried write found the table as it leaves it; taking it as applied", "table", t.name, "write", what)
}

// holds reports whether stored has every property of written, with its value.
func holds(stored, written store.Properties) bool {
	for name, v := range written {
		if w, ok := stored[name]; !ok || !store.EqualValues(v, w) {
			return false
		}
	}
	return true
}
