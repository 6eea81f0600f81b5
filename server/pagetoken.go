package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"log/slog"
	"strings"

	"github.com/metadatad/metadatad/store"
)

// A next_page_token is opaque (AIP-158): base64url of a versioned binary
// record, the query's fingerprint and the store cursor, sealed by a
// checksum of the rest. The checksum is not a signature: a key of this
// process would refuse the tokens of another replica, or of this one
// before a restart, and a key kept in the store would be one more table
// for copy and restore to carry, to protect nothing a client cannot read
// anyway (a token only resumes the query it names, within the camera the
// request names). It makes a damaged or hand-made token fail loudly, as
// INVALID_ARGUMENT, instead of resuming somewhere else; the version lets a
// later format refuse this one, or read it, by its first byte.
const pageTokenVersion = 1

// The lengths of a token's fixed parts.
const (
	fingerprintBytes = 8
	checksumBytes    = 8
)

// queryFingerprint identifies a query by its method and every parameter but
// the page size, which may change from page to page.
func queryFingerprint(method string, params ...string) string {
	sum := sha256.Sum256([]byte(method + "\x00" + strings.Join(params, "\x00")))
	return string(sum[:fingerprintBytes])
}

// pageTokenChecksum seals a token's record.
func pageTokenChecksum(record []byte) []byte {
	sum := sha256.Sum256(append([]byte("metadatad page token\x00"), record...))
	return sum[:checksumBytes]
}

func encodePageToken(fingerprint string, next *store.Cursor) string {
	if next == nil {
		return ""
	}
	record := append([]byte{pageTokenVersion}, fingerprint...)
	record = binary.AppendUvarint(record, uint64(len(next.PartitionKey)))
	record = append(record, next.PartitionKey...)
	record = binary.AppendUvarint(record, uint64(len(next.RowKey)))
	record = append(record, next.RowKey...)
	return base64.RawURLEncoding.EncodeToString(append(record, pageTokenChecksum(record)...))
}

// decodePageToken returns a token's fingerprint and cursor; ok is false
// for any text encodePageToken did not write.
func decodePageToken(token string) (fingerprint string, cursor store.Cursor, ok bool) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(data) < 1+fingerprintBytes+checksumBytes || data[0] != pageTokenVersion {
		return "", store.Cursor{}, false
	}
	record, sum := data[:len(data)-checksumBytes], data[len(data)-checksumBytes:]
	if !bytes.Equal(sum, pageTokenChecksum(record)) {
		return "", store.Cursor{}, false
	}
	fingerprint, rest := string(record[1:1+fingerprintBytes]), record[1+fingerprintBytes:]
	partition, rest, ok := cutLengthPrefixed(rest)
	if !ok {
		return "", store.Cursor{}, false
	}
	row, rest, ok := cutLengthPrefixed(rest)
	if !ok || len(rest) != 0 {
		return "", store.Cursor{}, false
	}
	return fingerprint, store.Cursor{PartitionKey: partition, RowKey: row}, true
}

// cutLengthPrefixed cuts a uvarint length and that many bytes off b.
func cutLengthPrefixed(b []byte) (s string, rest []byte, ok bool) {
	n, size := binary.Uvarint(b)
	if size <= 0 || n > uint64(len(b)-size) {
		return "", nil, false
	}
	b = b[size:]
	return string(b[:n]), b[n:], true
}

// checkPageToken decodes a page token of the query; nil for the first page.
func (v *violations) checkPageToken(token, fingerprint string) *store.Cursor {
	if token == "" {
		return nil
	}
	tokenFingerprint, cursor, ok := decodePageToken(token)
	if !ok {
		v.add("page_token", "malformed: pass next_page_token exactly as a reply gave it")
		return nil
	}
	if tokenFingerprint != fingerprint {
		v.add("page_token", "belongs to another query")
		return nil
	}
	return &cursor
}

// listPage is one page of a list call as its response carries it: each
// item as its message, and the token of the next page of the query
// (empty on the last). Every list call maps its page so.
func listPage[T, M any](fingerprint string, items []T, next *store.Cursor, message func(T) M) ([]M, string) {
	var out []M
	for _, item := range items {
		out = append(out, message(item))
	}
	return out, encodePageToken(fingerprint, next)
}

// pageQuery is a list call's query: its method and parameters, which its
// page tokens are bound to, and the page the caller asks for.
type pageQuery struct {
	method    string
	params    []string
	pageSize  int32
	pageToken string
}

// readPage serves a list call: its page size and token checked (with the
// violations v already holds, of the call's own parameters), one page read
// through read, its items mapped to messages with the next page's token.
func readPage[T, M any](ctx context.Context, log *slog.Logger, v *violations, q pageQuery,
	read func(limit int, resume *store.Cursor) ([]T, *store.Cursor, error), message func(T) M) ([]M, string, error) {
	limit := v.checkPageSize(q.pageSize)
	fingerprint := queryFingerprint(q.method, q.params...)
	resume := v.checkPageToken(q.pageToken, fingerprint)
	if err := v.err(); err != nil {
		return nil, "", err
	}
	items, next, err := read(limit, resume)
	if err != nil {
		return nil, "", toStatus(ctx, log, err)
	}
	msgs, token := listPage(fingerprint, items, next, message)
	return msgs, token, nil
}
