package server

import (
	"encoding/base64"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// TestCheckPageSize: 0 is the default, a size over the maximum is lowered
// to it (AIP-158), a negative one is refused.
func TestCheckPageSize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int32
		want      int
		violation bool
	}{
		{"default", 0, defaultPageSize, false},
		{"one", 1, 1, false},
		{"the maximum", maxPageSize, maxPageSize, false},
		{"one over the maximum", maxPageSize + 1, maxPageSize, false},
		{"the largest int32", math.MaxInt32, maxPageSize, false},
		{"negative", -1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v violations
			if got := v.checkPageSize(tc.size); got != tc.want || (v.err() != nil) != tc.violation {
				t.Errorf("checkPageSize(%d) = %d, violation %v; want %d, violation %v", tc.size, got, v.err(), tc.want, tc.violation)
			}
		})
	}
}

// TestPageTokenIsOpaque: a token resumes its query where it said; it is
// not readable JSON; a token with any byte changed, cut short or of an
// unknown version is malformed, and one of another query is refused as
// such.
func TestPageTokenIsOpaque(t *testing.T) {
	fingerprint := queryFingerprint("List", "cam-1", "", "", "")
	cursor := &store.Cursor{PartitionKey: "cam-1", RowKey: "2516925183999999999"}
	token := encodePageToken(fingerprint, cursor)
	var v violations
	if got := v.checkPageToken(token, fingerprint); v.err() != nil || got == nil || *got != *cursor {
		t.Fatalf("the issued token resumes at %+v (%v), want %+v", got, v.err(), cursor)
	}
	data, _ := base64.RawURLEncoding.DecodeString(token)
	if strings.HasPrefix(string(data), "{") {
		t.Errorf("the token is readable JSON: %s", data)
	}
	damaged := map[string]string{"cut short": base64.RawURLEncoding.EncodeToString(data[:len(data)-1])}
	for i := range data {
		changed := []byte(string(data))
		changed[i] ^= 0x01
		damaged[fmt.Sprintf("byte %d changed", i)] = base64.RawURLEncoding.EncodeToString(changed)
	}
	for name, bad := range damaged {
		var v violations
		if got := v.checkPageToken(bad, fingerprint); got != nil || v.err() == nil {
			t.Errorf("%s: resumes at %+v, want it refused", name, got)
		}
	}
	var other violations
	other.checkPageToken(token, queryFingerprint("List", "cam-2", "", "", ""))
	if len(other.list) != 1 || other.list[0].GetDescription() != "belongs to another query" {
		t.Errorf("a token of another query: %v", other.list)
	}
}
