package pebble

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// TestBinaryValuesKeepEveryType: every property type of the contract comes
// back from the binary layout as it went in, type for type, as the
// conformance suite checks through the tables.
func TestBinaryValuesKeepEveryType(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props store.Properties
	}{
		{"every type", everyType()},
		{"no properties", nil},
		{"one string", store.Properties{"CameraId": "cam-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := store.Entity{PartitionKey: "p", RowKey: "r", Properties: tc.props, ETag: `W/"7"`,
				Timestamp: time.Date(2026, 11, 30, 12, 0, 0, 1, time.UTC)}
			value, err := encodeValue(in)
			if err != nil {
				t.Fatal(err)
			}
			if value[0] != valueBinary {
				t.Fatalf("written with version %d, want %d", value[0], valueBinary)
			}
			out, err := decodeValue("p", "r", value)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.props) == 0 && len(out.Properties) == 0 {
				out.Properties = tc.props
			}
			if !sameEntity(in, out) {
				t.Fatalf("round trip:\n%#v\n%#v", in, out)
			}
		})
	}
}

// TestJSONStoreStaysReadable opens testdata/json-v1, a store written by the
// build before binary values (commit 2c9cd44: the three rows below inserted
// through Table.Insert with the clock at 2026-11-30T12:00Z, values in EDM
// JSON), and reads every row as it was written; rows written again take the
// binary layout and read alike.
func TestJSONStoreStaysReadable(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(dir, os.DirFS("testdata/json-v1")); err != nil {
		t.Fatal(err)
	}
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	things, _ := db.Table(ctx, "Things")
	written := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	want := []store.Entity{
		{PartitionKey: "types", RowKey: "every-edm-type", Properties: everyType(), ETag: `W/"18ecfb93e9b9d3b0"`},
		{PartitionKey: "types", RowKey: "no-properties", Properties: store.Properties{}, ETag: `W/"18ecfb93e9b9d3b1"`},
		{PartitionKey: "cam-0001", RowKey: "2517454934399999999", ETag: `W/"18ecfb93e9b9d3b2"`, Properties: store.Properties{
			"CameraId": "cam-0001", "CapturedAt": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			"BlobUri": "https://blobs.example/cam-0001/1.jpg", "ContentType": "image/jpeg",
			"SizeBytes": int64(345678), "Width": int32(1920), "Height": int32(1080),
			"Attributes": `{"site":"north"}`, "IsClearDay": true,
		}},
	}
	for _, w := range want {
		w.Timestamp = written
		got, err := things.Get(ctx, w.PartitionKey, w.RowKey)
		if err != nil {
			t.Fatalf("%s/%s: %v", w.PartitionKey, w.RowKey, err)
		}
		if !sameEntity(got, w) {
			t.Fatalf("JSON row read back as\n%#v\nwant\n%#v", got, w)
		}
		if _, err := things.Insert(ctx, store.Entity{PartitionKey: w.PartitionKey, RowKey: w.RowKey}); err == nil {
			t.Fatalf("%s/%s: insert over a JSON row succeeded", w.PartitionKey, w.RowKey)
		}
		rewritten, err := things.Update(ctx, got, store.Merge, got.ETag)
		if err != nil {
			t.Fatalf("update of a JSON row by its ETag: %v", err)
		}
		value, closer, err := db.db.Get(encodeKey("things", w.PartitionKey, w.RowKey))
		if err != nil {
			t.Fatal(err)
		}
		version := value[0]
		closer.Close()
		again, err := things.Get(ctx, w.PartitionKey, w.RowKey)
		if err != nil {
			t.Fatal(err)
		}
		if version != valueBinary || !sameEntity(again, rewritten) || !store.EqualProperties(again.Properties, w.Properties) {
			t.Fatalf("rewritten row (version %d) reads\n%#v\nwant the properties of\n%#v", version, again, w)
		}
	}
	page, err := things.Query(ctx, store.Query{PartitionKey: "types", Where: []store.Equal{{Property: "Whole", Value: 3.0}}})
	if err != nil || len(page.Entities) != 1 || page.Entities[0].RowKey != "every-edm-type" {
		t.Fatalf("query by a double: %+v, %v", page, err)
	}
}
