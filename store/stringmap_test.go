package store

import (
	"encoding/json"
	"maps"
	"testing"
)

// stringMapCases are maps whose text takes each of encoding/json's
// escapes, and a sort order that escaping would change.
var stringMapCases = []struct {
	name string
	m    map[string]string
}{
	{"empty", map[string]string{}},
	{"plain", map[string]string{"site": "north", "lens": "wide"}},
	{"empty key and value", map[string]string{"": ""}},
	{"quote and backslash", map[string]string{`a"b`: `c\d`}},
	{"short escapes", map[string]string{"\b\f\n\r\t": "x"}},
	{"other control characters", map[string]string{"k": "\x00\x01\x1f\x7f"}},
	{"html", map[string]string{"<tag>": "a&b", "url": "https://x.example/?a=1&b=<2>"}},
	{"line and paragraph separators", map[string]string{"k": "a\u2028b\u2029c"}},
	{"invalid utf-8", map[string]string{"k\xff": "\xc3\x28 \xe2\x82 \xed\xa0\x80"}},
	{"astral and non-ascii", map[string]string{"émoji": "😀 \u00e9 \ufffd"}},
	// Marshal sorts the raw keys: "\n" (0x0a) before "!" (0x21), though
	// their escaped forms `\n` and `!` sort the other way.
	{"sort by raw key", map[string]string{"\n": "1", "!": "2", "\\": "3", "<": "4", "\xff": "5", "~": "6"}},
}

func TestAppendStringMapIsMarshal(t *testing.T) {
	for _, tc := range stringMapCases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendStringMap(nil, tc.m); string(got) != string(want) {
				t.Fatalf("encoded %q; json.Marshal writes %q", got, want)
			}
		})
	}
}

// parseCases are texts json.Unmarshal reads or refuses, each of which the
// parser must answer as Unmarshal does, on its own path or through it.
var parseCases = []struct {
	name, data string
}{
	{"flat", `{"a":"1","b":"2"}`},
	{"empty object", `{}`},
	{"null", `null`},
	{"whitespace", ` { "a" : "1" } `},
	{"repeated key keeps the last", `{"a":"1","a":"2"}`},
	{"escapes", `{"k":"\"\\\/\b\f\n\r\t\u0041\u00e9\u2028"}`},
	{"surrogate pair", `{"k":"\ud83d\ude00"}`},
	{"lone high surrogate", `{"k":"\ud83d"}`},
	{"high surrogate then an escape", `{"k":"\ud83d\n"}`},
	{"high surrogate then a bmp escape", `{"k":"\ud83d\u0041"}`},
	{"lone low surrogate", `{"k":"\ude00x"}`},
	{"upper case hex", `{"k":"\u00E9"}`},
	{"invalid utf-8", "{\"k\":\"\xff\"}"},
	{"raw control character", "{\"k\":\"\n\"}"},
	{"bad escape", `{"k":"\x"}`},
	{"short unicode escape", `{"k":"\u12"}`},
	{"apostrophe escape", `{"k":"\'"}`},
	{"number value", `{"k":1}`},
	{"null value", `{"k":null}`},
	{"trailing comma", `{"k":"v",}`},
	{"trailing data", `{"k":"v"}x`},
	{"unterminated", `{"k":"v"`},
	{"unterminated string", `{"k":"v`},
	{"array", `["k"]`},
	{"just a brace", `{`},
	{"missing colon", `{"k""v"}`},
}

func TestParseStringMapIsUnmarshal(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) { checkParse(t, tc.data) })
	}
	for _, tc := range stringMapCases {
		t.Run("encoded "+tc.name, func(t *testing.T) {
			data := string(appendStringMap(nil, tc.m))
			checkParse(t, data)
			if _, ok := parseFlatStringMap(data); !ok && len(tc.m) > 0 && tc.name != "invalid utf-8" {
				t.Errorf("%q, as the encoder writes it, left to json.Unmarshal", data)
			}
		})
	}
}

// checkParse fails unless parseStringMap reads data as json.Unmarshal
// does: the same map (nil or not) or an error in both.
func checkParse(t *testing.T, data string) {
	t.Helper()
	var want map[string]string
	wantErr := json.Unmarshal([]byte(data), &want)
	got, err := parseStringMap(data)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Fatalf("parse %q: error %v; json.Unmarshal's %v", data, err, wantErr)
	case err != nil:
		return
	case (got == nil) != (want == nil) || !maps.Equal(got, want):
		t.Fatalf("parse %q = %#v; json.Unmarshal reads %#v", data, got, want)
	}
}
