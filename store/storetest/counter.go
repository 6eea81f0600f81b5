package storetest

import (
	"testing"

	"github.com/metadatad/metadatad/store"
)

func testCounter(t *testing.T, h Harness) {
	tbl := newFixture(t, h)
	c, ok := tbl.(store.Counter)
	if !ok {
		t.Skipf("table %T does not implement store.Counter; callers count by reading", tbl)
	}
	for _, tc := range []struct {
		name      string
		partition string
		rows      store.Range
		want      int64
	}{
		{"whole partition", "cam", store.Range{}, int64(len(fixtureRows))},
		{"bounded", "cam", store.Range{From: "b", To: "c"}, 3},
		{"open from", "cam1", store.Range{To: "b0"}, 2},
		{"empty range", "cam", store.Range{From: "c", To: "c"}, 0},
		{"empty partition", "cam0", store.Range{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := c.CountRows(t.Context(), tc.partition, tc.rows)
			if err != nil || n != tc.want {
				t.Fatalf("CountRows(%q, %+v) = %d, %v; want %d", tc.partition, tc.rows, n, err, tc.want)
			}
		})
	}
	_, err := c.CountRows(t.Context(), "bad#key", store.Range{})
	wantIs(t, "CountRows of an invalid partition key", err, store.ErrInvalidKey)
}
