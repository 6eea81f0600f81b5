package store

import (
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"
)

// FuzzStringMap checks the string map codec against encoding/json, which
// wrote every row stored so far: the encoder writes Marshal's bytes, a map
// of valid UTF-8 reads back as itself (invalid bytes become U+FFFD, as
// with Unmarshal), and any text parses as Unmarshal reads it.
func FuzzStringMap(f *testing.F) {
	for _, tc := range stringMapCases {
		for k, v := range tc.m {
			f.Add(k, v, string(appendStringMap(nil, tc.m)))
		}
	}
	for _, tc := range parseCases {
		f.Add("k", "v", tc.data)
	}
	f.Fuzz(func(t *testing.T, k, v, data string) {
		// Two entries, so the sort is exercised.
		m := map[string]string{k: v, v + k: k}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		enc := appendStringMap(nil, m)
		if string(enc) != string(want) {
			t.Fatalf("encoded %#v as %q; json.Marshal writes %q", m, enc, want)
		}
		checkParse(t, string(enc))
		if utf8.ValidString(k) && utf8.ValidString(v) {
			if back, err := parseStringMap(string(enc)); err != nil || !maps.Equal(back, m) {
				t.Fatalf("%#v read back as %#v, %v", m, back, err)
			}
		}
		checkParse(t, data)
	})
}
