package store

import "testing"

// benchAttributes is a create's attribute map as acquisition services send
// it: a few short entries, one with a character JSON escapes.
var benchAttributes = map[string]string{
	"site": "north-gate", "lens": "wide", "exposure": "1/250", "firmware": "4.2.1",
	"source": "https://acq.example/cams/17?stream=main&profile=hd",
}

// BenchmarkSetStringMap is the encoding of a create's attributes.
func BenchmarkSetStringMap(b *testing.B) {
	props := Properties{}
	for b.Loop() {
		SetStringMap(props, "Attributes", benchAttributes)
	}
}

// BenchmarkStringMap is the decoding of a read row's attributes.
func BenchmarkStringMap(b *testing.B) {
	props := Properties{}
	SetStringMap(props, "Attributes", benchAttributes)
	e := Entity{PartitionKey: "cam", RowKey: "row", Properties: props}
	for b.Loop() {
		if _, err := StringMap(e, "Attributes"); err != nil {
			b.Fatal(err)
		}
	}
}
