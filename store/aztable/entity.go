package aztable

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
)

// encodeEntity is the JSON body of a write of e: its keys, then its
// properties in Azure's EDM JSON, the encoding both backends share, so that
// an Int64 stays an Int64 and a whole Double stays a Double for the .NET
// readers of the same tables.
func encodeEntity(e store.Entity) ([]byte, error) {
	props, err := store.MarshalEDM(e.Properties)
	if err != nil {
		return nil, err
	}
	keys, err := json.Marshal(struct{ PartitionKey, RowKey string }{e.PartitionKey, e.RowKey})
	if err != nil {
		return nil, err
	}
	if len(props) <= len("{}") {
		return keys, nil
	}
	return append(append(keys[:len(keys)-1], ','), props[1:]...), nil
}

// decodeEntity reads an entity as the service sent it. It works on the raw
// response body, not on the SDK's re-encoding of it: the SDK decodes numbers
// into float64 and writes a stored 2.0 back as 2, which would read as Int32.
func decodeEntity(raw []byte) (store.Entity, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return store.Entity{}, fmt.Errorf("aztable: decode entity: %w", err)
	}
	var e store.Entity
	var ts string
	for name, dst := range map[string]*string{"PartitionKey": &e.PartitionKey, "RowKey": &e.RowKey, "Timestamp": &ts} {
		if err := json.Unmarshal(fields[name], dst); err != nil {
			return store.Entity{}, fmt.Errorf("aztable: decode entity %s: %w", name, err)
		}
	}
	// The ETag is in the body of list answers; Get has it in a header.
	if etag, ok := fields["odata.etag"]; ok {
		if err := json.Unmarshal(etag, &e.ETag); err != nil {
			return store.Entity{}, fmt.Errorf("aztable: decode entity ETag: %w", err)
		}
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return store.Entity{}, fmt.Errorf("aztable: decode entity Timestamp: %w", err)
	}
	e.Timestamp = t.UTC()
	if e.Properties, err = store.PropertiesFromEDM(fields); err != nil {
		return store.Entity{}, err
	}
	return e, nil
}
