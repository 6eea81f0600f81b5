package store

import (
	"maps"
	"testing"
	"time"
)

func TestStringMap(t *testing.T) {
	props := Properties{}
	if SetStringMap(props, "Attributes", nil); len(props) != 0 {
		t.Fatalf("empty map stored %v; want nothing", props)
	}
	want := map[string]string{"b": "2", "a": "1"}
	SetStringMap(props, "Attributes", want)
	if props["Attributes"] != `{"a":"1","b":"2"}` {
		t.Fatalf("stored %q; want JSON with sorted keys", props["Attributes"])
	}
	got, err := StringMap(Entity{Properties: props}, "Attributes")
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("read back %v, %v", got, err)
	}
	if got, err := StringMap(Entity{Properties: Properties{}}, "Attributes"); err != nil || got != nil {
		t.Fatalf("absent map read %v, %v", got, err)
	}
	if _, err := StringMap(Entity{Properties: Properties{"Attributes": "{"}}, "Attributes"); err == nil {
		t.Fatal("malformed JSON accepted")
	}
}

func TestCapturedAt(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)
	stored, err := CapturedAt(Entity{RowKey: "x", Properties: Properties{"CapturedAt": at}}, "CapturedAt")
	if err != nil || !stored.Equal(at) {
		t.Fatalf("from the property: %s, %v", stored, err)
	}
	fromKey, err := CapturedAt(Entity{RowKey: InvertedTicksRowKey(at)}, "CapturedAt")
	if err != nil || !fromKey.Equal(at) {
		t.Fatalf("from the row key: %s, %v", fromKey, err)
	}
	if _, err := CapturedAt(Entity{RowKey: "not-ticks"}, "CapturedAt"); err == nil {
		t.Fatal("a row without the property or an inverted-ticks key was read")
	}
}
