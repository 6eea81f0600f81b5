package pebble_test

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
)

// TestPartitionEnds visits each partition from the one asked for, with its
// first and last row keys, until the visit stops, and nothing of another
// table or of a partition deleted whole.
func TestPartitionEnds(t *testing.T) {
	ctx := t.Context()
	db := openMem(t, vfs.NewMem())
	rows, err := db.Table(ctx, "Rows")
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.Table(ctx, "Rowsx")
	if err != nil {
		t.Fatal(err)
	}
	put := func(tb store.Table, pk string, rks ...string) {
		for _, rk := range rks {
			if _, err := tb.Insert(ctx, store.Entity{PartitionKey: pk, RowKey: rk}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(rows, "a", "3", "1", "2")
	put(rows, "b", "9")
	put(rows, "gone", "1")
	put(rows, "c", "5", "7")
	put(other, "b2", "1")
	if err := rows.Delete(ctx, "gone", "1", ""); err != nil {
		t.Fatal(err)
	}
	var got []string
	visit := func(stopAt string) func(pk, first, last string) (bool, error) {
		return func(pk, first, last string) (bool, error) {
			got = append(got, pk+":"+first+"-"+last)
			return pk != stopAt, nil
		}
	}
	for _, c := range []struct {
		from, stopAt string
		want         []string
	}{
		{"", "", []string{"a:1-3", "b:9-9", "c:5-7"}},
		{"a0", "", []string{"b:9-9", "c:5-7"}},
		{"", "b", []string{"a:1-3", "b:9-9"}},
		{"d", "", nil},
	} {
		got = nil
		if err := db.PartitionEnds(ctx, "Rows", c.from, visit(c.stopAt)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("from %q, stop at %q: %v, want %v", c.from, c.stopAt, got, c.want)
		}
	}
}
