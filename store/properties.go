package store

import (
	"fmt"
	"time"
)

// SetStringMap stores a string map as the JSON string property name, the
// form a .NET reader can parse; an empty map stores nothing. Keys are
// sorted, so equal maps encode equal and an identical retried insert
// compares equal to the stored one. The text is byte for byte what
// encoding/json's Marshal writes (see stringmap.go), so rows written
// before and after read and compare the same.
func SetStringMap(props Properties, name string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	props[name] = string(appendStringMap(make([]byte, 0, stringMapSize(m)), m))
}

// stringMapSize is the length of m's text when nothing in it is escaped,
// so one allocation usually holds it.
func stringMapSize(m map[string]string) int {
	n := 1
	for k, v := range m {
		n += len(k) + len(v) + 6
	}
	return n
}

// StringMap reads back a map stored by SetStringMap; nil when absent.
func StringMap(e Entity, name string) (map[string]string, error) {
	data, _ := e.Properties[name].(string)
	if data == "" {
		return nil, nil
	}
	m, err := parseStringMap(data)
	if err != nil {
		return nil, fmt.Errorf("store: row %s/%s %s: %w", e.PartitionKey, e.RowKey, name, err)
	}
	return m, nil
}

// ParseStringMap reads a map SetStringMap stored, from the property's
// string; nil for the empty string.
func ParseStringMap(data string) (map[string]string, error) {
	if data == "" {
		return nil, nil
	}
	m, err := parseStringMap(data)
	if err != nil {
		return nil, fmt.Errorf("store: string map: %w", err)
	}
	return m, nil
}

// CapturedAt is an inverted-ticks row's instant: its DateTime property
// name, or, for rows written without one (as older .NET writers did), the
// instant its row key encodes.
func CapturedAt(e Entity, name string) (time.Time, error) {
	if t, ok := e.Properties[name].(time.Time); ok && !t.IsZero() {
		return t, nil
	}
	t, err := TimeFromInvertedTicksRowKey(e.RowKey)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: row %s/%s: %w", e.PartitionKey, e.RowKey, err)
	}
	return t, nil
}
