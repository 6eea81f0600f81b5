package pebble

import (
	"bytes"
	"errors"
	"fmt"
)

const sep = 0x00

var errCorrupt = errors.New("pebble: corrupt record")

// tablePrefix is the key prefix shared by every row of a table.
func tablePrefix(table string) []byte { return append([]byte(table), sep) }

// partitionPrefix is the key prefix shared by every row of one partition.
func partitionPrefix(table, partitionKey string) []byte {
	return append(append(tablePrefix(table), partitionKey...), sep)
}

func encodeKey(table, partitionKey, rowKey string) []byte {
	return appendKey(make([]byte, 0, len(table)+len(partitionKey)+len(rowKey)+2), table, partitionKey, rowKey)
}

// appendKey appends the key of the row to dst; an empty rowKey gives the
// partition's first key. (An empty rowKey in a range's To means the end
// of the partition: see table.rowBounds.)
func appendKey(dst []byte, table, partitionKey, rowKey string) []byte {
	dst = append(append(append(dst, table...), sep), partitionKey...)
	return append(append(dst, sep), rowKey...)
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

// keyReader decodes the keys of a walk over a table, where a partition's
// rows come one after another: it gives each row the string of the
// partition key it gave the row before, where the bytes are the same,
// instead of a new one.
type keyReader struct {
	table     string
	partition string
}

func (k *keyReader) decode(key []byte) (partitionKey, rowKey string, err error) {
	rest := key[len(k.table)+1:]
	i := bytes.IndexByte(rest, sep)
	if i < 0 {
		return "", "", fmt.Errorf("%w: key %q", errCorrupt, key)
	}
	if string(rest[:i]) != k.partition {
		k.partition = string(rest[:i])
	}
	return k.partition, string(rest[i+1:]), nil
}
