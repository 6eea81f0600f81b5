package storetest

import (
	"testing"

	"github.com/metadatad/metadatad/store"
)

// newRangeDeleter opens a fresh table holding the ordering fixture and
// returns it as the store.RangeDeleter it implements.
func newRangeDeleter(t *testing.T, h Harness) (store.Table, store.RangeDeleter) {
	t.Helper()
	tbl := newFixture(t, h)
	rd, ok := tbl.(store.RangeDeleter)
	if !ok {
		t.Fatalf("table %T stopped implementing store.RangeDeleter", tbl)
	}
	return tbl, rd
}

func testRangeDeleter(t *testing.T, h Harness) {
	tbl := newTable(t, h)
	if _, ok := tbl.(store.RangeDeleter); !ok {
		t.Skipf("table %T does not implement store.RangeDeleter; callers fall back to query and batch deletes", tbl)
	}

	// The fixture's partitions are prefixes of each other, so a backend that
	// deletes by key prefix removes rows of "cam1" and "camé" with "cam".
	for _, tc := range []struct {
		name    string
		rows    store.Range
		deleted []string
	}{
		{"from and to", store.Range{From: "b", To: "c"}, []string{"b", "b0", "ba"}},
		{"bounds between keys", store.Range{From: "a0", To: "b00"}, []string{"b", "b0"}},
		{"open from", store.Range{To: "b0"}, []string{"a", "b"}},
		{"open to", store.Range{From: "c"}, []string{"c", "d", "é"}},
		{"whole partition", store.Range{}, fixtureRows},
		{"empty range", store.Range{From: "b", To: "b"}, nil},
		{"gap", store.Range{From: "bb", To: "c"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, rd := newRangeDeleter(t, h)
			if err := rd.DeleteRange(t.Context(), "cam", tc.rows); err != nil {
				t.Fatalf("DeleteRange: %v", err)
			}
			gone := map[key]bool{}
			for _, k := range rows("cam", tc.deleted...) {
				gone[k] = true
			}
			var want []key
			for _, k := range fixture() {
				if !gone[k] {
					want = append(want, k)
				}
			}
			wantKeys(t, "Scan after DeleteRange", scanAll(t, tbl, store.Scan{}), want)
		})
	}

	t.Run("EmptyPartition", func(t *testing.T) {
		tbl, rd := newRangeDeleter(t, h)
		if err := rd.DeleteRange(t.Context(), "cam0", store.Range{}); err != nil {
			t.Fatalf("DeleteRange of an empty partition: %v", err)
		}
		wantKeys(t, "Scan after DeleteRange", scanAll(t, tbl, store.Scan{}), fixture())
	})
}
