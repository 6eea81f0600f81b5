package pebble

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// BenchmarkValue encodes and decodes an image's primary row in the binary
// layout and in the EDM JSON layout it replaced, in the same run.
func BenchmarkValue(b *testing.B) {
	e := store.Entity{ETag: `W/"18ecfb93e9b9d3b2"`, Timestamp: time.Now(), Properties: store.Properties{
		"CameraId": "cam-0001", "CapturedAt": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		"BlobUri": "https://blobs.example/cam-0001/1.jpg", "ContentType": "image/jpeg",
		"SizeBytes": int64(345678), "Width": int32(1920), "Height": int32(1080),
		"Attributes": `{"site":"north"}`,
	}}
	layouts := []struct {
		name   string
		encode func(store.Entity) ([]byte, error)
	}{
		{"json", encodeJSONValue},
		{"binary", encodeValue},
	}
	for _, l := range layouts {
		b.Run("encode/"+l.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.encode(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, l := range layouts {
		value, err := l.encode(e)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("decode/"+l.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeValue("cam-0001", "2517454934399999999", value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// encodeJSONValue is the valueJSON layout, as builds before the binary
// layout wrote it.
func encodeJSONValue(e store.Entity) ([]byte, error) {
	props, err := store.MarshalEDM(e.Properties)
	if err != nil {
		return nil, err
	}
	buf := []byte{valueJSON}
	buf = binary.AppendUvarint(buf, uint64(len(e.ETag)))
	buf = append(buf, e.ETag...)
	buf = binary.AppendVarint(buf, e.Timestamp.UnixNano())
	return append(buf, props...), nil
}
