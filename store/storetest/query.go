package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// Partition and row keys of the ordering fixture. Each partition key is a
// prefix of the next, and "camé" sorts after "cam1" only by bytes: a backend
// that scans by key prefix, or orders by anything but bytes, leaks rows from
// one partition into another. The row keys are prefixes of each other too.
var (
	fixturePartitions = []string{"ca", "cam", "cam1", "camé"}
	fixtureRows       = []string{"a", "b", "b0", "ba", "c", "d", "é"}
)

// fixture is the keys of every row of every fixture partition, in order.
func fixture() []key {
	var ks []key
	for _, pk := range fixturePartitions {
		ks = append(ks, rows(pk, fixtureRows...)...)
	}
	return ks
}

// newFixture opens a fresh table holding the fixture, inserted in a shuffled
// order so that insertion order cannot pass for key order.
func newFixture(t *testing.T, h Harness) store.Table {
	t.Helper()
	tbl := newTable(t, h)
	ks := fixture()
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
	insertAll(t, tbl, ks)
	return tbl
}

// pageLimits are the limits list tests run with: the default, and small ones
// that make every range span several pages.
var pageLimits = []int{0, 1, 2, 3}

func testQuery(t *testing.T, h Harness) {
	t.Run("Order", func(t *testing.T) {
		tbl := newFixture(t, h)
		for _, pk := range fixturePartitions {
			got := queryAll(t, tbl, store.Query{PartitionKey: pk})
			wantKeys(t, "Query "+pk, got, rows(pk, fixtureRows...))
			for _, e := range got {
				wantProps(t, fmt.Sprintf("Query %s: %s", pk, keyOf(e)), e.Properties, rowProps(keyOf(e)))
			}
		}
		wantKeys(t, "Query of an empty partition", queryAll(t, tbl, store.Query{PartitionKey: "cam0"}), nil)
	})

	t.Run("Rows", func(t *testing.T) {
		tbl := newFixture(t, h)
		for _, tc := range []struct {
			name string
			rows store.Range
			want []string
		}{
			{"open", store.Range{}, fixtureRows},
			{"from", store.Range{From: "b"}, []string{"b", "b0", "ba", "c", "d", "é"}},
			{"to", store.Range{To: "c"}, []string{"a", "b", "b0", "ba"}},
			{"from and to", store.Range{From: "b", To: "c"}, []string{"b", "b0", "ba"}},
			{"bounds between keys", store.Range{From: "a0", To: "b00"}, []string{"b", "b0"}},
			{"one row", store.Range{From: "b0", To: "ba"}, []string{"b0"}},
			{"gap", store.Range{From: "bb", To: "c"}, nil},
			{"from equals to", store.Range{From: "b", To: "b"}, nil},
			{"from after to", store.Range{From: "d", To: "b"}, nil},
			{"bytes order", store.Range{To: "z"}, []string{"a", "b", "b0", "ba", "c", "d"}},
			{"past the last", store.Range{From: "éa"}, nil},
		} {
			for _, limit := range pageLimits {
				t.Run(fmt.Sprintf("%s, limit %d", tc.name, limit), func(t *testing.T) {
					got := queryAll(t, tbl, store.Query{PartitionKey: "cam", Rows: tc.rows, Limit: limit})
					wantKeys(t, "Query", got, rows("cam", tc.want...))
				})
			}
		}
	})

	t.Run("Paging", func(t *testing.T) {
		tbl := newFixture(t, h)
		for _, limit := range []int{1, 2, 3, len(fixtureRows) - 1, len(fixtureRows), len(fixtureRows) + 1} {
			got := queryAll(t, tbl, store.Query{PartitionKey: "cam1", Limit: limit})
			wantKeys(t, fmt.Sprintf("Query with limit %d", limit), got, rows("cam1", fixtureRows...))
		}
	})

	t.Run("Where", func(t *testing.T) {
		tbl := newTable(t, h)
		insertWhereFixture(t, tbl, "p")
		// The neighbouring partition matches every condition; it must never show.
		insertWhereFixture(t, tbl, "p1")
		for _, tc := range whereCases {
			for _, limit := range []int{0, 1} {
				t.Run(fmt.Sprintf("%s, limit %d", tc.name, limit), func(t *testing.T) {
					got := queryAll(t, tbl, store.Query{PartitionKey: "p", Where: tc.where, Limit: limit})
					wantKeys(t, "Query", got, rows("p", tc.want...))
				})
			}
		}
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		tbl := newTable(t, h)
		var ks []key
		for i := range store.MaxPageSize + 1 {
			ks = append(ks, key{"big", fmt.Sprintf("%05d", i)})
		}
		neighbours := append(rows("bi", "00000"), rows("big1", "00000")...)
		batchInsertAll(t, tbl, append(neighbours, ks...))
		got, pages := readAll(t, 0, func(resume *store.Cursor) (store.Page, error) {
			return tbl.Query(t.Context(), store.Query{PartitionKey: "big", Resume: resume})
		})
		wantKeys(t, "Query with limit 0", got, ks)
		if pages < 2 {
			t.Errorf("Query with limit 0 returned %d entities in %d page; a page holds at most %d", len(got), pages, store.MaxPageSize)
		}
	})

	t.Run("InvalidLimit", func(t *testing.T) {
		tbl := newFixture(t, h)
		for _, limit := range []int{-1, store.MaxPageSize + 1} {
			_, err := tbl.Query(t.Context(), store.Query{PartitionKey: "cam", Limit: limit})
			wantIs(t, fmt.Sprintf("Query with limit %d", limit), err, store.ErrInvalidQuery)
		}
		for _, limit := range []int{1, store.MaxPageSize} {
			if _, err := tbl.Query(t.Context(), store.Query{PartitionKey: "cam", Limit: limit}); err != nil {
				t.Errorf("Query with limit %d: %v", limit, err)
			}
		}
	})
}

// Instants of the Where fixture; whereLater is given in another zone by a
// condition to show that times compare as instants.
var (
	whereEarlier = time.Date(2026, 1, 1, 0, 2, 0, 100, time.UTC)
	whereLater   = time.Date(2026, 1, 1, 0, 3, 0, 123456700, time.UTC)
)

// insertWhereFixture writes the entities the Where cases filter. r1 and r2
// differ in the type of N only, int32 against int64.
func insertWhereFixture(t *testing.T, tbl store.Table, pk string) {
	t.Helper()
	for _, e := range []store.Entity{
		entity(key{pk, "r1"}, store.Properties{"Kind": "a", "N": int32(1), "Ok": true, "Price": 1.5, "When": whereEarlier, "Blob": []byte{1, 2}}),
		entity(key{pk, "r2"}, store.Properties{"Kind": "b", "N": int64(1), "Ok": false, "Price": 2.0, "When": whereLater, "Blob": []byte{3}}),
		entity(key{pk, "r3"}, store.Properties{"Kind": "a", "N": int32(2), "Ok": true, "Price": 1.5, "When": whereLater}),
		entity(key{pk, "r4"}, store.Properties{"Kind": "c"}),
	} {
		mustInsert(t, tbl, e)
	}
}

// whereCases are the conditions Query and Scan filter the Where fixture by,
// with the rows that match in each partition.
var whereCases = []struct {
	name  string
	where []store.Equal
	want  []string
}{
	{"none", nil, []string{"r1", "r2", "r3", "r4"}},
	{"string", []store.Equal{eq("Kind", "a")}, []string{"r1", "r3"}},
	{"int32 does not match int64", []store.Equal{eq("N", int32(1))}, []string{"r1"}},
	{"int64 does not match int32", []store.Equal{eq("N", int64(1))}, []string{"r2"}},
	{"float64 does not match integers", []store.Equal{eq("N", 1.0)}, nil},
	{"bool true", []store.Equal{eq("Ok", true)}, []string{"r1", "r3"}},
	{"bool false", []store.Equal{eq("Ok", false)}, []string{"r2"}},
	{"float64", []store.Equal{eq("Price", 1.5)}, []string{"r1", "r3"}},
	{"whole float64", []store.Equal{eq("Price", 2.0)}, []string{"r2"}},
	{"time", []store.Equal{eq("When", whereEarlier)}, []string{"r1"}},
	{"time in another zone", []store.Equal{eq("When", whereLater.In(time.FixedZone("UTC+5:30", 5*3600+1800)))}, []string{"r2", "r3"}},
	{"binary", []store.Equal{eq("Blob", []byte{1, 2})}, []string{"r1"}},
	{"every condition", []store.Equal{eq("Kind", "a"), eq("N", int32(2))}, []string{"r3"}},
	{"conditions that exclude each other", []store.Equal{eq("Kind", "a"), eq("Kind", "b")}, nil},
	{"missing property", []store.Equal{eq("Absent", "a")}, nil},
	// Values of stored types that no entity can hold meet nothing.
	{"NaN", []store.Equal{eq("Price", math.NaN())}, nil},
	{"time finer than 100 ns", []store.Equal{eq("When", whereEarlier.Add(50))}, nil},
	{"string over 64 KiB", []store.Equal{eq("Kind", strings.Repeat("a", store.MaxValueBytes))}, nil},
	{"no match", []store.Equal{eq("Kind", "z")}, nil},
}

// whereRows is the keys matching a Where case in the given partitions, in order.
func whereRows(want []string, partitions ...string) []key {
	var ks []key
	for _, pk := range partitions {
		ks = append(ks, rows(pk, want...)...)
	}
	return ks
}

func eq(property string, value any) store.Equal { return store.Equal{Property: property, Value: value} }
