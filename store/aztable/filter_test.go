package aztable

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

func TestQueryFilter(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    store.Query
		want string // "" with ok false: the query matches nothing
	}{
		{"partition only", store.Query{PartitionKey: "cam1"}, "PartitionKey eq 'cam1'"},
		{"quotes doubled", store.Query{PartitionKey: "it's", Rows: store.Range{From: "'", To: "''"}},
			"PartitionKey eq 'it''s' and RowKey ge '''' and RowKey lt ''''''"},
		{"row range", store.Query{PartitionKey: "p", Rows: store.Range{From: "a", To: "c"}},
			"PartitionKey eq 'p' and RowKey ge 'a' and RowKey lt 'c'"},
		{"cursor after From", store.Query{PartitionKey: "p", Rows: store.Range{From: "a"}, Resume: &store.Cursor{PartitionKey: "p", RowKey: "b"}},
			"PartitionKey eq 'p' and RowKey ge 'b'"},
		{"cursor before From", store.Query{PartitionKey: "p", Rows: store.Range{From: "c"}, Resume: &store.Cursor{PartitionKey: "p", RowKey: "b"}},
			"PartitionKey eq 'p' and RowKey ge 'c'"},
		{"empty range", store.Query{PartitionKey: "p", Rows: store.Range{From: "b", To: "b"}}, ""},
		{"cursor past To", store.Query{PartitionKey: "p", Rows: store.Range{To: "b"}, Resume: &store.Cursor{PartitionKey: "p", RowKey: "b"}}, ""},
		{"no injection through a value", store.Query{PartitionKey: "p", Where: []store.Equal{{Property: "Kind", Value: "a' or RowKey ne '"}}},
			"PartitionKey eq 'p' and Kind eq 'a'' or RowKey ne '''"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := queryFilter(tc.q)
			if got := f.String(); ok != (tc.want != "") || got != tc.want {
				t.Errorf("queryFilter = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestScanFilter(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    store.Scan
		want string
		ok   bool
	}{
		{"whole table", store.Scan{}, "", true},
		{"partition range", store.Scan{Partitions: store.Range{From: "a", To: "c"}}, "PartitionKey ge 'a' and PartitionKey lt 'c'", true},
		{"empty range", store.Scan{Partitions: store.Range{From: "c", To: "a"}}, "", false},
		{"cursor inside a partition", store.Scan{Partitions: store.Range{To: "z"}, Resume: &store.Cursor{PartitionKey: "p", RowKey: "r"}},
			"((PartitionKey eq 'p' and RowKey ge 'r') or PartitionKey gt 'p') and PartitionKey lt 'z'", true},
		{"cursor at a partition's start", store.Scan{Partitions: store.Range{From: "a"}, Resume: &store.Cursor{PartitionKey: "p"}},
			"PartitionKey ge 'p'", true},
		{"cursor before the range", store.Scan{Partitions: store.Range{From: "m"}, Resume: &store.Cursor{PartitionKey: "a", RowKey: "r"}},
			"PartitionKey ge 'm'", true},
		{"cursor past the range", store.Scan{Partitions: store.Range{To: "m"}, Resume: &store.Cursor{PartitionKey: "m", RowKey: "r"}}, "", false},
		{"conditions", store.Scan{Where: []store.Equal{{Property: "Ok", Value: true}}}, "Ok eq true", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := scanFilter(tc.s)
			if got := f.String(); ok != tc.ok || got != tc.want {
				t.Errorf("scanFilter = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestWhere(t *testing.T) {
	when := time.Date(2026, 1, 1, 0, 3, 0, 123456700, time.FixedZone("UTC+5:30", 5*3600+1800))
	for _, tc := range []struct {
		name  string
		value any
		// want is the condition sent; "" when none is.
		want string
	}{
		{"string", "caméra", "P eq 'caméra'"},
		{"string with quotes", "it's ''", "P eq 'it''s '''''"},
		{"empty string", "", "P eq ''"},
		{"true", true, "P eq true"},
		{"false", false, "P eq false"},
		{"int32", int32(-7), "P eq -7"},
		{"max int32", int32(math.MaxInt32), "P eq 2147483647"},
		{"int64 left to the process", int64(1), ""},
		{"whole float64", 2.0, "P eq 2.0"},
		{"fraction", -0.1, "P eq -0.1"},
		{"tiny float64 without exponent", math.SmallestNonzeroFloat64, "P eq 0." + strings.Repeat("0", 323) + "5"},
		{"huge float64 without exponent", 1e21, "P eq 1" + strings.Repeat("0", 21) + ".0"},
		{"time in UTC at 100 ns", when, "P eq datetime'2025-12-31T18:33:00.1234567Z'"},
		{"binary", []byte{0, 1, 0xfe, 0xff}, "P eq X'0001feff'"},
		{"empty binary", []byte{}, "P eq X''"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (filter{}).where([]store.Equal{{Property: "P", Value: tc.value}}).String(); got != tc.want {
				t.Errorf("where(P = %#v) = %q; want %q", tc.value, got, tc.want)
			}
		})
	}
}
