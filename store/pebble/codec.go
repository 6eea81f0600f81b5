package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
)

const (
	sep          = 0x00
	valueVersion = 1
)

var errCorrupt = errors.New("pebble: corrupt record")

// tablePrefix is the key prefix shared by every row of a table.
func tablePrefix(table string) []byte { return append([]byte(table), sep) }

// partitionPrefix is the key prefix shared by every row of one partition.
func partitionPrefix(table, partitionKey string) []byte {
	return append(append(tablePrefix(table), partitionKey...), sep)
}

func encodeKey(table, partitionKey, rowKey string) []byte {
	return append(partitionPrefix(table, partitionKey), rowKey...)
}

// decodeKey splits a key of the table into its partition and row keys.
func decodeKey(table string, key []byte) (partitionKey, rowKey string, err error) {
	rest := key[len(table)+1:]
	i := bytes.IndexByte(rest, sep)
	if i < 0 {
		return "", "", fmt.Errorf("%w: key %q", errCorrupt, key)
	}
	return string(rest[:i]), string(rest[i+1:]), nil
}

// encodeValue lays out a stored entity as: version byte, ETag (uvarint length
// then bytes), write time (varint Unix nanoseconds), properties as EDM JSON.
// EDM JSON is Azure's own entity encoding, so both backends type values alike.
func encodeValue(e store.Entity) ([]byte, error) {
	props, err := store.MarshalEDM(e.Properties)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 1+binary.MaxVarintLen64*2+len(e.ETag)+len(props))
	buf = append(buf, valueVersion)
	buf = binary.AppendUvarint(buf, uint64(len(e.ETag)))
	buf = append(buf, e.ETag...)
	buf = binary.AppendVarint(buf, e.Timestamp.UnixNano())
	return append(buf, props...), nil
}

func decodeValue(partitionKey, rowKey string, value []byte) (store.Entity, error) {
	if len(value) == 0 || value[0] != valueVersion {
		return store.Entity{}, fmt.Errorf("%w: unknown value version", errCorrupt)
	}
	rest := value[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || uint64(len(rest)-k) < n {
		return store.Entity{}, fmt.Errorf("%w: etag", errCorrupt)
	}
	etag := string(rest[k : k+int(n)])
	rest = rest[k+int(n):]
	nanos, k := binary.Varint(rest)
	if k <= 0 {
		return store.Entity{}, fmt.Errorf("%w: timestamp", errCorrupt)
	}
	props, err := store.UnmarshalEDM(rest[k:])
	if err != nil {
		return store.Entity{}, err
	}
	return store.Entity{
		PartitionKey: partitionKey,
		RowKey:       rowKey,
		Properties:   props,
		ETag:         etag,
		Timestamp:    time.Unix(0, nanos).UTC(),
	}, nil
}
