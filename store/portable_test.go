package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// engineTable is an engine's table with none of the optional interfaces;
// the test never calls its methods.
type engineTable struct{ store.Table }

type counts struct{}

func (counts) CountRows(context.Context, string, store.Range) (int64, error) { return 7, nil }

// TestFastPathsFollowTheEngine checks that the portable table implements
// exactly the optional interfaces its engine's table implements: callers
// choose a fast path by type assertion, so one lost would slow them and
// one invented would fail them.
func TestFastPathsFollowTheEngine(t *testing.T) {
	for _, tc := range []struct {
		engine  store.Table
		counter bool
	}{
		{engineTable{}, false},
		{struct {
			engineTable
			counts
		}{}, true},
	} {
		t.Run(fmt.Sprintf("counter=%v", tc.counter), func(t *testing.T) {
			b := store.NewBackend(store.Driver{OpenTable: func(context.Context, string) (store.Table, error) { return tc.engine, nil }})
			tbl, err := b.Table(t.Context(), "things")
			if err != nil {
				t.Fatal(err)
			}
			c, counter := tbl.(store.Counter)
			if counter != tc.counter {
				t.Fatalf("portable table: counter=%v; want the engine's", counter)
			}
			if counter {
				if n, err := c.CountRows(t.Context(), "p", store.Range{}); err != nil || n != 7 {
					t.Errorf("CountRows = %d, %v; want the engine's 7", n, err)
				}
			}
		})
	}
}

// TestTransactorFollowsTheEngine checks that the portable backend is a
// store.Transactor exactly when its engine transacts.
func TestTransactorFollowsTheEngine(t *testing.T) {
	open := func(context.Context, string) (store.Table, error) { return engineTable{}, nil }
	if _, ok := store.NewBackend(store.Driver{OpenTable: open}).(store.Transactor); ok {
		t.Error("backend over an engine without Transact implements store.Transactor")
	}
	transact := func(context.Context, []store.TableOp) error { return nil }
	if _, ok := store.NewBackend(store.Driver{OpenTable: open, Transact: transact}).(store.Transactor); !ok {
		t.Error("backend over an engine with Transact does not implement store.Transactor")
	}
}
