package pebble

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// FuzzDecodeValue: a stored value of any bytes (a damaged file, a bug)
// decodes or is refused, never panics, walks (walkValue, a Walk's reader)
// to what it decodes to or is refused alike, and what decodes encodes to
// a value that decodes to the same entity, type for type and bit for bit.
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{valueJSON})
	f.Add(append([]byte{valueJSON, 3, 'W', '/', '1', 2}, `{"CameraId":"cam-1"}`...))
	f.Add(append([]byte{valueJSON, 0xff, 0xff, 0xff, 0xff, 0x0f}, `{}`...))
	f.Add([]byte{valueBinary + 1, 0, 0, 0})
	f.Add([]byte{valueBinary, 0, 0, 0})
	f.Add([]byte{valueBinary, 0, 0, 1, 1, 'A', tagInt32, 0xff, 0xff, 0xff, 0xff, 0x1f})
	f.Add([]byte{valueBinary, 0, 0, 2, 1, 'A', tagTrue, 1, 'A', tagFalse})
	for _, props := range []store.Properties{
		everyType(),
		{"NaN": math.NaN(), "Inf": math.Inf(-1), "Max": store.TimeFromTicks(store.MaxTicks), "Zero": store.TimeFromTicks(0)},
	} {
		value, err := encodeValue(store.Entity{Properties: props, ETag: `W/"1"`, Timestamp: time.Unix(0, 42)})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(value)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		e, err := decodeValue("p", "r", value)
		walked := store.Properties{}
		werr := walkValue(value, func(name string, v store.Value) bool {
			if v.Kind == store.KindBinary {
				v.Bytes = bytesCopy(v.Bytes)
			}
			walked[name] = v.Any()
			return true
		})
		if (err == nil) != (werr == nil) {
			t.Fatalf("value %q: decoded with %v, walked with %v", value, err, werr)
		}
		if err != nil {
			return
		}
		if !sameEntity(e, store.Entity{PartitionKey: "p", RowKey: "r", ETag: e.ETag, Timestamp: e.Timestamp, Properties: walked}) {
			t.Fatalf("value %q: walked %#v, decoded %#v", value, walked, e.Properties)
		}
		again, err := encodeValue(e)
		if err != nil {
			if value[0] == valueBinary {
				t.Fatalf("decoded binary value %q does not encode: %v", value, err)
			}
			return // a JSON value the binary layout refuses, such as a time before year 1: never written
		}
		back, err := decodeValue("p", "r", again)
		if err != nil {
			t.Fatalf("re-encoded value %q does not decode: %v", again, err)
		}
		if !sameEntity(e, back) {
			t.Fatalf("round trip changed the entity:\n%#v\n%#v", e, back)
		}
		if reencoded, _ := encodeValue(back); !bytes.Equal(reencoded, again) {
			t.Fatalf("value changes on a second round trip:\n%q\n%q", again, reencoded)
		}
	})
}

// everyType is a property of each of the contract's types, with the values
// a loose encoding would change: a whole double, an int64 past float64's
// integers, 100 ns of precision, the ends of the DateTime range.
func everyType() store.Properties {
	return store.Properties{
		"S": "text ü 日本", "Empty": "", "T": true, "F": false,
		"I32": int32(-2147483648), "I64": int64(9007199254740993), "Small64": int64(7),
		"D": 1.5, "Whole": 3.0, "Neg": -0.25, "Big": 1e300,
		"At": time.Date(2026, 11, 30, 23, 59, 59, 123456700, time.UTC), "Old": time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC),
		"Bin": []byte{0, 1, 2, 0xff}, "NoBin": []byte{},
	}
}

// sameEntity compares entities exactly: types, doubles by their bits,
// times by instant and zone.
func sameEntity(a, b store.Entity) bool {
	if a.PartitionKey != b.PartitionKey || a.RowKey != b.RowKey || a.ETag != b.ETag ||
		!a.Timestamp.Equal(b.Timestamp) || len(a.Properties) != len(b.Properties) {
		return false
	}
	for name, v := range a.Properties {
		w, ok := b.Properties[name]
		if !ok {
			return false
		}
		switch v := v.(type) {
		case float64:
			w, ok := w.(float64)
			if !ok || math.Float64bits(v) != math.Float64bits(w) {
				return false
			}
		case time.Time:
			w, ok := w.(time.Time)
			if !ok || !v.Equal(w) || v.Location() != w.Location() {
				return false
			}
		default:
			if !store.EqualValues(v, w) {
				return false
			}
		}
	}
	return true
}
