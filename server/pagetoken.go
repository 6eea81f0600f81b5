package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/metadatad/metadatad/store"
)

// pageToken is the opaque next_page_token: the store cursor plus a
// fingerprint of the query it belongs to, so a token replayed against
// another query is refused instead of silently reading the wrong rows.
type pageToken struct {
	Query     string `json:"q"`
	Partition string `json:"p"`
	Row       string `json:"r"`
}

// queryFingerprint identifies a query by its method and every parameter but
// the page size, which may change from page to page.
func queryFingerprint(method string, params ...string) string {
	sum := sha256.Sum256([]byte(method + "\x00" + strings.Join(params, "\x00")))
	return hex.EncodeToString(sum[:8])
}

func encodePageToken(fingerprint string, next *store.Cursor) string {
	if next == nil {
		return ""
	}
	data, _ := json.Marshal(pageToken{Query: fingerprint, Partition: next.PartitionKey, Row: next.RowKey})
	return base64.RawURLEncoding.EncodeToString(data)
}

// checkPageToken decodes a page token of the query; nil for the first page.
func (v *violations) checkPageToken(token, fingerprint string) *store.Cursor {
	if token == "" {
		return nil
	}
	data, err := base64.RawURLEncoding.DecodeString(token)
	var pt pageToken
	if err != nil || json.Unmarshal(data, &pt) != nil || pt.Query == "" {
		v.add("page_token", "malformed")
		return nil
	}
	if pt.Query != fingerprint {
		v.add("page_token", "belongs to another query")
		return nil
	}
	return &store.Cursor{PartitionKey: pt.Partition, RowKey: pt.Row}
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
