package store

import (
	"testing"
	"time"
)

// benchCreate is what a single-image create asks the store to check: its
// index row and its primary row, as one transaction's operations.
func benchCreate() []TableOp {
	at := time.Date(2026, 12, 4, 2, 30, 0, 123456700, time.UTC)
	rowKey := InvertedTicksRowKey(at)
	props := Properties{
		"CameraId": "cam-0017", "CapturedAt": at, "BlobUri": "https://blobs.example/cam-0017/123456.jpg",
		"ContentType": "image/jpeg", "SizeBytes": int64(345678), "Width": int32(1920), "Height": int32(1080),
	}
	SetStringMap(props, "Attributes", benchAttributes)
	return []TableOp{
		{Table: namedTable{name: "SingleImageMetadataIndex"}, Op: Op{Kind: OpUpsert, Mode: Replace, Entity: Entity{
			PartitionKey: MinutePartitionKey(at), RowKey: rowKey + "_cam-0017",
			Properties: Properties{"DeviceId": "cam-0017", "MetadataRowKey": rowKey},
		}}},
		{Table: namedTable{name: "SingleImageMetadata"}, Op: Op{Kind: OpInsert, Entity: Entity{
			PartitionKey: "cam-0017", RowKey: rowKey, Properties: props,
		}}},
	}
}

// BenchmarkValidateEntity is the check of a create's primary row.
func BenchmarkValidateEntity(b *testing.B) {
	e := benchCreate()[1].Op.Entity
	for b.Loop() {
		if err := ValidateEntity(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateTransaction is the check of a create's transaction on
// a backend with transactions, its only check in the store.
func BenchmarkValidateTransaction(b *testing.B) {
	ops := benchCreate()
	for b.Loop() {
		if err := ValidateTransaction(ops); err != nil {
			b.Fatal(err)
		}
	}
}
