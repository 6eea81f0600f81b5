package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// SetStringMap stores a string map as the JSON string property name, the
// form a .NET reader can parse; an empty map stores nothing. encoding/json
// sorts map keys, so equal maps encode equal and an identical retried
// insert compares equal to the stored one.
func SetStringMap(props Properties, name string, m map[string]string) error {
	if len(m) == 0 {
		return nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", name, err)
	}
	props[name] = string(data)
	return nil
}

// StringMap reads back a map stored by SetStringMap; nil when absent.
func StringMap(e Entity, name string) (map[string]string, error) {
	data, _ := e.Properties[name].(string)
	if data == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return nil, fmt.Errorf("store: row %s/%s %s: %w", e.PartitionKey, e.RowKey, name, err)
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
