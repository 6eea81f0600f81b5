package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// errReached is what the reference engine answers a call that reached it.
var errReached = errors.New("storetest: the call reached the engine")

// reference is the portable layer over an engine that fails the test on
// every call that reaches it: the expected answer to input that the layer
// must refuse by itself. Its tables implement every optional interface.
func reference(t *testing.T) store.Backend {
	return store.NewBackend(store.Driver{
		OpenTable: func(_ context.Context, name string) (store.Table, error) {
			return unreachable{t: t, name: name}, nil
		},
		Transact: func(context.Context, []store.TableOp) error {
			t.Error("the portable layer passed a refused transaction to the engine")
			return errReached
		},
	})
}

// unreachable is a table of the reference engine.
type unreachable struct {
	t    *testing.T
	name string
}

func (u unreachable) reached(call string) error {
	u.t.Errorf("the portable layer passed a refused %s to the engine", call)
	return errReached
}

func (u unreachable) Name() string { return u.name }

func (u unreachable) Insert(context.Context, store.Entity) (store.Entity, error) {
	return store.Entity{}, u.reached("Insert")
}

func (u unreachable) Upsert(context.Context, store.Entity, store.WriteMode) (store.Entity, error) {
	return store.Entity{}, u.reached("Upsert")
}

func (u unreachable) Update(context.Context, store.Entity, store.WriteMode, string) (store.Entity, error) {
	return store.Entity{}, u.reached("Update")
}

func (u unreachable) Get(context.Context, string, string) (store.Entity, error) {
	return store.Entity{}, u.reached("Get")
}

func (u unreachable) Delete(context.Context, string, string, string) error {
	return u.reached("Delete")
}

func (u unreachable) Query(context.Context, store.Query) (store.Page, error) {
	return store.Page{}, u.reached("Query")
}

func (u unreachable) Scan(context.Context, store.Scan) (store.Page, error) {
	return store.Page{}, u.reached("Scan")
}

func (u unreachable) Batch(context.Context, []store.Op) error { return u.reached("Batch") }

func (u unreachable) CountRows(context.Context, string, store.Range) (int64, error) {
	return 0, u.reached("CountRows")
}
