package pebble

import (
	"bytes"
	"testing"
)

// FuzzDecodeValue: a stored value of any bytes (a damaged file, a bug)
// decodes or is refused, never panics, and what decodes encodes back to a
// value that decodes alike.
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{valueVersion})
	f.Add(append([]byte{valueVersion, 3, 'W', '/', '1', 2}, `{"CameraId":"cam-1"}`...))
	f.Add(append([]byte{valueVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}, `{}`...))
	f.Add([]byte{valueVersion + 1, 0, 0, '{', '}'})
	f.Fuzz(func(t *testing.T, value []byte) {
		e, err := decodeValue("p", "r", value)
		if err != nil {
			return
		}
		again, err := encodeValue(e)
		if err != nil {
			return // decodes but breaks the entity rules, such as a NaN: never written
		}
		back, err := decodeValue("p", "r", again)
		if err != nil {
			t.Fatalf("re-encoded value %q does not decode: %v", again, err)
		}
		if reencoded, _ := encodeValue(back); !bytes.Equal(reencoded, again) {
			t.Fatalf("value changes on a second round trip:\n%q\n%q", again, reencoded)
		}
	})
}
