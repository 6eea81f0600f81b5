package storetest

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// testWalk checks store.Walk on the backend: through the table's own Walk
// where it has one (store.Walker) and through Scan where it has not, it
// reads what Scan reads, row for row and property for property.
func testWalk(t *testing.T, h Harness) {
	t.Run("SameAsScan", func(t *testing.T) {
		tbl := newFixture(t, h)
		typed := key{"cam", "typed"}
		mustInsert(t, tbl, entity(typed, everyType()))
		want := scanAll(t, tbl, store.Scan{})
		for _, limit := range pageLimits {
			t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
				got := walkAll(t, tbl, store.Scan{Limit: limit})
				wantKeys(t, "Walk", got, keysOf(want))
				for i := range min(len(got), len(want)) {
					wantProps(t, fmt.Sprintf("Walk of %s", keyOf(want[i])), got[i].Properties, want[i].Properties)
				}
			})
		}
		from := store.Range{From: "cam", To: "cam1"}
		wantKeys(t, "Walk of one partition", walkAll(t, tbl, store.Scan{Partitions: from}), keysOf(scanAll(t, tbl, store.Scan{Partitions: from})))
	})

	t.Run("Filtered", func(t *testing.T) {
		// A scan that filters or selects is Scan's to read: store.Walk hands
		// it there, whatever the table.
		tbl := newFixture(t, h)
		s := store.Scan{Where: []store.Equal{{Property: "Row", Value: "b"}}, Select: []string{"Row"}}
		got := walkAll(t, tbl, s)
		wantKeys(t, "Walk with a filter", got, keysOf(scanAll(t, tbl, s)))
		if len(got) == 0 {
			t.Fatal("the filter meets no row of the fixture")
		}
	})

	t.Run("StopsAtError", func(t *testing.T) {
		tbl := newFixture(t, h)
		stop := errors.New("enough")
		rows := 0
		next, err := store.Walk(t.Context(), tbl, store.Scan{}, func(string, string, iter.Seq2[string, store.Value]) error {
			if rows++; rows == 2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || next != nil || rows != 2 {
			t.Fatalf("Walk after its RowFunc failed at row 2: %d rows, next %v, %v; want the RowFunc's error", rows, next, err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		tbl := newFixture(t, h)
		_, err := store.Walk(t.Context(), tbl, store.Scan{Partitions: store.Range{From: "bad#key"}},
			func(string, string, iter.Seq2[string, store.Value]) error { return nil })
		wantIs(t, "Walk of an invalid partition range", err, store.ErrInvalidQuery)
		if w, ok := tbl.(store.Walker); ok {
			_, err := w.Walk(t.Context(), store.Scan{Select: []string{"Row"}},
				func(string, string, iter.Seq2[string, store.Value]) error { return nil })
			wantIs(t, "a table's Walk that selects", err, store.ErrInvalidQuery)
		}
	})
}

// walkAll follows a walk from its first page to its last, each row an
// entity of its keys and properties (binary values copied, as a reader
// that keeps them must), checking that a page holds at most its limit and
// that its cursor moves on.
func walkAll(t *testing.T, tbl store.Table, s store.Scan) []store.Entity {
	t.Helper()
	limit := s.Limit
	if limit == 0 {
		limit = store.MaxPageSize
	}
	var all []store.Entity
	for pages := 1; ; pages++ {
		var page []store.Entity
		next, err := store.Walk(t.Context(), tbl, s, func(pk, rk string, props iter.Seq2[string, store.Value]) error {
			e := store.Entity{PartitionKey: pk, RowKey: rk, Properties: store.Properties{}}
			var names []string
			for name, v := range props {
				names = append(names, name)
				if v.Kind == store.KindBinary {
					v.Bytes = slices.Clone(v.Bytes)
					if v.Bytes == nil {
						v.Bytes = []byte{}
					}
				}
				e.Properties[name] = v.Any()
			}
			if !slices.IsSorted(names) {
				t.Errorf("Walk: %s's properties came as %v, want name order", keyOf(e), names)
			}
			page = append(page, e)
			return nil
		})
		if err != nil {
			t.Fatalf("Walk, page %d: %v", pages, err)
		}
		if len(page) > limit {
			t.Fatalf("Walk, page %d: %d rows, over the limit %d", pages, len(page), limit)
		}
		all = append(all, page...)
		if next == nil {
			return all
		}
		if s.Resume != nil && compareKeys(key(*s.Resume), key(*next)) >= 0 {
			t.Fatalf("Walk, page %d: next %s does not move past %s", pages, key(*next), key(*s.Resume))
		}
		s.Resume = next
	}
}
