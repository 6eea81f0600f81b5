package storetest

import (
	"fmt"
	"testing"

	"github.com/metadatad/metadatad/store"
)

func testScan(t *testing.T, h Harness) {
	t.Run("Order", func(t *testing.T) {
		tbl := newTable(t, h)
		// Ordered as (PartitionKey, RowKey), ("cam", "9") comes before
		// ("cam1", "0"); a backend that orders the concatenated keys puts
		// "cam10" before "cam9".
		want := []key{{"cam", "9"}, {"cam", "90"}, {"cam1", "0"}, {"camé", "0"}}
		insertAll(t, tbl, []key{want[2], want[3], want[1], want[0]})
		for _, limit := range pageLimits {
			wantKeys(t, fmt.Sprintf("Scan with limit %d", limit), scanAll(t, tbl, store.Scan{Limit: limit}), want)
		}
	})

	t.Run("Partitions", func(t *testing.T) {
		tbl := newFixture(t, h)
		for _, tc := range []struct {
			name       string
			partitions store.Range
			want       []string
		}{
			{"open", store.Range{}, fixturePartitions},
			{"from", store.Range{From: "cam"}, []string{"cam", "cam1", "camé"}},
			{"to", store.Range{To: "cam1"}, []string{"ca", "cam"}},
			{"one partition", store.Range{From: "cam", To: "cam1"}, []string{"cam"}},
			{"bounds between keys", store.Range{From: "cam0", To: "camz"}, []string{"cam1"}},
			{"from equals to", store.Range{From: "cam", To: "cam"}, nil},
			{"from after to", store.Range{From: "cam1", To: "ca"}, nil},
			{"past the last", store.Range{From: "camé0"}, nil},
		} {
			var want []key
			for _, pk := range tc.want {
				want = append(want, rows(pk, fixtureRows...)...)
			}
			for _, limit := range pageLimits {
				t.Run(fmt.Sprintf("%s, limit %d", tc.name, limit), func(t *testing.T) {
					wantKeys(t, "Scan", scanAll(t, tbl, store.Scan{Partitions: tc.partitions, Limit: limit}), want)
				})
			}
		}
	})

	t.Run("Retention", func(t *testing.T) {
		// The retention engine scans the minute partitions of the index up to
		// a cutoff minute. A partition with a suffix ("_3", a shard) belongs
		// to its minute and sorts before the next minute.
		tbl := newTable(t, h)
		var all []key
		for _, pk := range []string{"202601010000", "202601010000_3", "202601010001", "202601010002"} {
			all = append(all, rows(pk, "cam1_2516350750799999999", "cam2_2516350750799999999")...)
		}
		insertAll(t, tbl, all)
		for _, limit := range pageLimits {
			got := scanAll(t, tbl, store.Scan{Partitions: store.Range{To: "202601010001"}, Limit: limit})
			wantKeys(t, fmt.Sprintf("Scan up to 202601010001 with limit %d", limit), got, all[:4])
		}
	})

	t.Run("Paging", func(t *testing.T) {
		tbl := newFixture(t, h)
		for _, limit := range []int{1, 2, 3, len(fixtureRows), len(fixture()) - 1, len(fixture())} {
			wantKeys(t, fmt.Sprintf("Scan with limit %d", limit), scanAll(t, tbl, store.Scan{Limit: limit}), fixture())
		}
	})

	t.Run("Where", func(t *testing.T) {
		tbl := newTable(t, h)
		insertWhereFixture(t, tbl, "p")
		insertWhereFixture(t, tbl, "p1")
		insertWhereFixture(t, tbl, "q")
		for _, tc := range whereCases {
			for _, limit := range []int{0, 1} {
				t.Run(fmt.Sprintf("%s, limit %d", tc.name, limit), func(t *testing.T) {
					got := scanAll(t, tbl, store.Scan{Partitions: store.Range{To: "q"}, Where: tc.where, Limit: limit})
					wantKeys(t, "Scan", got, whereRows(tc.want, "p", "p1"))
				})
			}
		}
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		tbl := newTable(t, h)
		var ks []key
		for p := range 25 {
			for r := range 100 {
				ks = append(ks, key{fmt.Sprintf("part%02d", p), fmt.Sprintf("row%03d", r)})
			}
		}
		batchInsertAll(t, tbl, ks)
		got, pages := readAll(t, 0, func(resume *store.Cursor) (store.Page, error) {
			return tbl.Scan(t.Context(), store.Scan{Resume: resume})
		})
		wantKeys(t, "Scan with limit 0", got, ks)
		if minPages := (len(ks) + store.MaxPageSize - 1) / store.MaxPageSize; pages < minPages {
			t.Errorf("Scan with limit 0 returned %d entities in %d pages, want at least %d pages", len(got), pages, minPages)
		}
	})

	t.Run("InvalidLimit", func(t *testing.T) {
		tbl := newFixture(t, h)
		for _, limit := range []int{-1, store.MaxPageSize + 1} {
			_, err := tbl.Scan(t.Context(), store.Scan{Limit: limit})
			wantIs(t, fmt.Sprintf("Scan with limit %d", limit), err, store.ErrInvalidQuery)
		}
		for _, limit := range []int{1, store.MaxPageSize} {
			if _, err := tbl.Scan(t.Context(), store.Scan{Limit: limit}); err != nil {
				t.Errorf("Scan with limit %d: %v", limit, err)
			}
		}
	})

	t.Run("Select", func(t *testing.T) {
		// The purge reads index rows by their keys alone: a selection must
		// bring the keys, ETag and Timestamp of every row and only the named
		// properties, on every page.
		tbl := newTable(t, h)
		props := store.Properties{"DeviceId": "cam1", "Size": int64(7), "Clear": true}
		stored := map[key]store.Entity{}
		for _, k := range []key{{"202601010000", "a"}, {"202601010000", "b"}, {"202601010001", "a"}} {
			stored[k] = mustInsert(t, tbl, entity(k, props))
		}
		for _, tc := range []struct {
			name string
			sel  []string
			want store.Properties
		}{
			{"all", nil, props},
			{"keys only", []string{}, store.Properties{}},
			{"one", []string{"DeviceId"}, store.Properties{"DeviceId": "cam1"}},
			{"one and one missing", []string{"Size", "Missing"}, store.Properties{"Size": int64(7)}},
		} {
			for _, limit := range []int{1, 0} {
				got := scanAll(t, tbl, store.Scan{Select: tc.sel, Limit: limit})
				if len(got) != len(stored) {
					t.Fatalf("Scan selecting %s, limit %d: %d entities, want %d", tc.name, limit, len(got), len(stored))
				}
				for _, e := range got {
					what := fmt.Sprintf("Scan selecting %s, limit %d: %v", tc.name, limit, keyOf(e))
					want := stored[keyOf(e)]
					if e.ETag != want.ETag || !e.Timestamp.Equal(want.Timestamp) {
						t.Errorf("%s: ETag %q, Timestamp %v; want %q, %v", what, e.ETag, e.Timestamp, want.ETag, want.Timestamp)
					}
					wantProps(t, what, e.Properties, tc.want)
				}
			}
		}
		got := scanAll(t, tbl, store.Scan{Select: []string{"DeviceId"}, Where: []store.Equal{{Property: "DeviceId", Value: "cam1"}}})
		if len(got) != len(stored) {
			t.Errorf("Scan selecting and matching DeviceId: %d entities, want %d", len(got), len(stored))
		}
		for _, tc := range []struct {
			name string
			scan store.Scan
		}{
			{"a system property", store.Scan{Select: []string{"RowKey"}}},
			{"not a name", store.Scan{Select: []string{"no such"}}},
			{"a condition on an unselected property", store.Scan{Select: []string{}, Where: []store.Equal{{Property: "DeviceId", Value: "cam1"}}}},
		} {
			_, err := tbl.Scan(t.Context(), tc.scan)
			wantIs(t, "Scan selecting "+tc.name, err, store.ErrInvalidQuery)
		}
	})
}
