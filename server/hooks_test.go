package server_test

import (
	"context"
	"slices"

	"github.com/metadatad/metadatad/store"
)

// queryHook runs in place of a table's Query; next runs the real one.
type queryHook func(ctx context.Context, next func() (store.Page, error)) (store.Page, error)

// hookQuery wraps backend so that every Query of its image tables goes
// through hook, to inject failures, panics and waits below the server; the
// purge engine's own tables are left alone. The wrapper
// is a plain store.Backend: it hides the backend's store.Transactor, so
// creates take the ordered two-write path of a backend without transactions.
func hookQuery(backend store.Backend, hook queryHook) store.Backend {
	return hookedBackend{Backend: backend, hook: hook}
}

type hookedBackend struct {
	store.Backend
	hook queryHook
}

func (b hookedBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil || !slices.Contains(tableNames(), name) {
		return t, err
	}
	return hookedTable{Table: t, hook: b.hook}, nil
}

type hookedTable struct {
	store.Table
	hook queryHook
}

func (t hookedTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	return t.hook(ctx, func() (store.Page, error) { return t.Table.Query(ctx, q) })
}
