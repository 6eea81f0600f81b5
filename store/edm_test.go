package store

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
)

// wantSameProperties compares property sets name by name, type included.
func wantSameProperties(t *testing.T, what string, got, want Properties) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: property %s missing, want %T(%v)", what, name, w, w)
		case !EqualValues(g, w):
			t.Errorf("%s: property %s = %T(%v), want %T(%v)", what, name, g, g, w, w)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected property %s = %T(%v)", what, name, g, g)
		}
	}
}

func TestEDMRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
	}{
		{"string", "caméra ☃ 𝄞 \"quoted\""},
		{"empty string", ""},
		{"numeric string", "42"},
		{"true", true},
		{"false", false},
		{"int32", int32(-7)},
		{"min int32", int32(math.MinInt32)},
		{"max int32", int32(math.MaxInt32)},
		{"int64 that fits int32", int64(1)},
		{"int64 beyond 2^53", int64(1<<53 + 1)},
		{"min int64", int64(math.MinInt64)},
		{"max int64", int64(math.MaxInt64)},
		{"whole float64", 2.0},
		{"zero float64", 0.0},
		{"fractional float64", -0.1},
		{"large float64", 1e300},
		{"smallest float64", math.SmallestNonzeroFloat64},
		{"time at 100 ns", time.Date(2026, 1, 1, 0, 2, 59, 123456700, time.UTC)},
		{"whole second", time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)},
		{"earliest time", time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"latest time", time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)},
		{"binary", []byte{0, 1, 2, 0xfe, 0xff}},
		{"empty binary", []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := Properties{"V": tc.value}
			data, err := MarshalEDM(props)
			if err != nil {
				t.Fatalf("MarshalEDM: %v", err)
			}
			got, err := UnmarshalEDM(data)
			if err != nil {
				t.Fatalf("UnmarshalEDM(%s): %v", data, err)
			}
			wantSameProperties(t, "UnmarshalEDM("+string(data)+")", got, props)
			if tv, ok := got["V"].(time.Time); ok && tv.Location() != time.UTC {
				t.Errorf("UnmarshalEDM(%s): time in %s, want UTC", data, tv.Location())
			}
		})
	}
}

func TestEDMRoundTripAllTogether(t *testing.T) {
	props := Properties{
		"Text": "x", "Ok": true, "N": int32(1), "Big": int64(1<<53 + 1), "Price": 2.0,
		"Captured": time.Date(2026, 1, 1, 0, 2, 0, 100, time.UTC), "Blob": []byte{1},
	}
	data, err := MarshalEDM(props)
	if err != nil {
		t.Fatalf("MarshalEDM: %v", err)
	}
	got, err := UnmarshalEDM(data)
	if err != nil {
		t.Fatalf("UnmarshalEDM(%s): %v", data, err)
	}
	wantSameProperties(t, "round trip", got, props)
}

// TestMarshalEDMWire pins the JSON the .NET system reads: annotations on the
// types JSON cannot carry and DateTime with seven fraction digits.
func TestMarshalEDMWire(t *testing.T) {
	data, err := MarshalEDM(Properties{
		"Text":     "x",
		"N":        int32(7),
		"Big":      int64(9007199254740993),
		"Price":    2.0,
		"Captured": time.Date(2026, 1, 1, 1, 2, 0, 123456789, time.FixedZone("CET", 3600)),
		"Blob":     []byte{0, 1, 2, 0xff},
	})
	if err != nil {
		t.Fatalf("MarshalEDM: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	want := map[string]any{
		"Text":                "x",
		"N":                   7.0,
		"Big":                 "9007199254740993",
		"Big@odata.type":      "Edm.Int64",
		"Price":               2.0,
		"Price@odata.type":    "Edm.Double",
		"Captured":            "2026-01-01T00:02:00.1234567Z",
		"Captured@odata.type": "Edm.DateTime",
		"Blob":                "AAEC/w==",
		"Blob@odata.type":     "Edm.Binary",
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s = %#v, want %#v (JSON %s)", name, g, w, data)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d members, want %d: %s", len(got), len(want), data)
	}
}

func TestMarshalEDMRejectsUnsupportedType(t *testing.T) {
	for _, v := range []any{1, uint64(1), float32(1), nil, map[string]any{}} {
		if _, err := MarshalEDM(Properties{"V": v}); !errors.Is(err, ErrInvalidEntity) {
			t.Errorf("MarshalEDM(%T): error %v, want ErrInvalidEntity", v, err)
		}
	}
}

// azureEntity is an entity as Azure Table Storage returns it with full
// metadata: OData members, the system properties with their annotations,
// and annotations only where JSON cannot type a value.
const azureEntity = `{
	"odata.metadata": "https://account.table.core.windows.net/$metadata#images/@Element",
	"odata.type": "account.images",
	"odata.id": "https://account.table.core.windows.net/images(PartitionKey='cam1',RowKey='2516350750799999999')",
	"odata.etag": "W/\"datetime'2026-01-01T00%3A02%3A00.1234567Z'\"",
	"odata.editLink": "images(PartitionKey='cam1',RowKey='2516350750799999999')",
	"PartitionKey": "cam1",
	"RowKey": "2516350750799999999",
	"Timestamp@odata.type": "Edm.DateTime",
	"Timestamp": "2026-01-01T00:02:00.1234567Z",
	"Camera": "cam1",
	"Width": 1920,
	"Negative": -5,
	"Ok": true,
	"Price@odata.type": "Edm.Double",
	"Price": 2,
	"Ratio": 1.5,
	"WholeRatio": 2.0,
	"Size@odata.type": "Edm.Int64",
	"Size": "9007199254740993",
	"Captured@odata.type": "Edm.DateTime",
	"Captured": "2026-01-01T00:02:00.1234567Z",
	"Thumb@odata.type": "Edm.Binary",
	"Thumb": "AAEC/w==",
	"Id@odata.type": "Edm.Guid",
	"Id": "c9a646d3-9c61-4cb7-bfcd-ee2522c8f633"
}`

func TestUnmarshalEDMFromAzure(t *testing.T) {
	got, err := UnmarshalEDM([]byte(azureEntity))
	if err != nil {
		t.Fatalf("UnmarshalEDM: %v", err)
	}
	wantSameProperties(t, "UnmarshalEDM", got, Properties{
		"Camera":     "cam1",
		"Width":      int32(1920),
		"Negative":   int32(-5),
		"Ok":         true,
		"Price":      2.0,
		"Ratio":      1.5,
		"WholeRatio": 2.0,
		"Size":       int64(9007199254740993),
		"Captured":   time.Date(2026, 1, 1, 0, 2, 0, 123456700, time.UTC),
		"Thumb":      []byte{0, 1, 2, 0xff},
		"Id":         "c9a646d3-9c61-4cb7-bfcd-ee2522c8f633",
	})
}

func TestUnmarshalEDMRejects(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"not an object", `[1]`},
		{"unknown type", `{"V@odata.type": "Edm.Decimal", "V": "1"}`},
		{"Int64 not a number", `{"V@odata.type": "Edm.Int64", "V": "x"}`},
		{"DateTime not a time", `{"V@odata.type": "Edm.DateTime", "V": "yesterday"}`},
		{"Binary not base64", `{"V@odata.type": "Edm.Binary", "V": "!!"}`},
		{"annotation not a string", `{"V@odata.type": 1, "V": 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := UnmarshalEDM([]byte(tc.json)); err == nil {
				t.Errorf("UnmarshalEDM(%s) = %v, want an error", tc.json, got)
			}
		})
	}
}
