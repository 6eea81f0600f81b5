package store

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// A string map is stored as the JSON text encoding/json's Marshal wrote
// for it (the rows this service wrote before this encoder existed hold
// exactly that), so the encoder below must write the same bytes for every
// map: an identical retried insert compares equal to the stored row only
// if its text does. Rows other writers stored may be spaced or escaped
// otherwise; the reader takes them as Unmarshal does.
// It is hand-written because Marshal goes through reflection and a sort of
// reflected keys, a visible part of every create's CPU.

// appendStringMap appends m as encoding/json's Marshal encodes it: keys
// sorted bytewise, strings escaped as appendJSONString escapes them.
func appendStringMap(dst []byte, m map[string]string) []byte {
	// Attribute maps are small: their keys usually fit on the stack.
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	// Marshal sorts the raw keys, before escaping, with strings.Compare.
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, m[k])
	}
	return append(dst, '}')
}

// hexDigits are the lower-case digits encoding/json writes in \u escapes.
const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's appendString with HTML escaping on,
// as Marshal calls it (see encode.go): \" \\ \b \f \n \r \t, \u00XX for the
// other control characters and for < > &, \u2028 and \u2029 (which break
// JSONP), and \ufffd for each byte of invalid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// parseStringMap reads a map that appendStringMap wrote, or any JSON object
// of strings, giving what json.Unmarshal into a map[string]string gives.
// It reads the flat form without whitespace itself and hands anything else
// (whitespace, null, a malformed or non-string value, invalid UTF-8) to
// json.Unmarshal, so that every answer and every error is Unmarshal's.
func parseStringMap(data string) (map[string]string, error) {
	if m, ok := parseFlatStringMap(data); ok {
		return m, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// parseFlatStringMap reads {"k":"v",...} without whitespace; ok is false
// for anything else, which the caller leaves to json.Unmarshal.
func parseFlatStringMap(data string) (m map[string]string, ok bool) {
	if len(data) < 2 || data[0] != '{' {
		return nil, false
	}
	m = make(map[string]string, strings.Count(data, `":"`))
	i := 1
	if data[i] == '}' {
		return m, i+1 == len(data)
	}
	for {
		k, next, ok := parseJSONString(data, i)
		if !ok || next >= len(data) || data[next] != ':' {
			return nil, false
		}
		v, end, ok := parseJSONString(data, next+1)
		if !ok || end >= len(data) {
			return nil, false
		}
		// A repeated key keeps its last value, as Unmarshal's does.
		m[k] = v
		switch data[end] {
		case ',':
			i = end + 1
		case '}':
			return m, end+1 == len(data)
		default:
			return nil, false
		}
	}
}

// parseJSONString reads the JSON string starting at data[i] and returns it
// unescaped as Unmarshal's unquote does, and the index after its closing
// quote. ok is false for what it leaves to Unmarshal: a control character,
// invalid UTF-8 (which Unmarshal replaces), a malformed escape.
func parseJSONString(data string, i int) (s string, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return "", 0, false
	}
	i++
	start := i
	var buf []byte // nil until an escape makes s differ from the input
	for i < len(data) {
		b := data[i]
		switch {
		case b == '"':
			if buf == nil {
				return data[start:i], i + 1, true
			}
			return string(append(buf, data[start:i]...)), i + 1, true
		case b < ' ':
			return "", 0, false
		case b == '\\':
			buf = append(buf, data[start:i]...)
			var n int
			if buf, n, ok = appendUnescaped(buf, data[i:]); !ok {
				return "", 0, false
			}
			i += n
			start = i
		case b < utf8.RuneSelf:
			i++
		default:
			c, size := utf8.DecodeRuneInString(data[i:])
			if c == utf8.RuneError && size == 1 {
				return "", 0, false
			}
			i += size
		}
	}
	return "", 0, false
}

// appendUnescaped appends what the escape at the start of esc stands for
// and says how many bytes it took, as Unmarshal's unquote reads escapes:
// a \u escape of half a surrogate pair not followed by its other half is
// U+FFFD, and the escape after it is read on its own.
func appendUnescaped(dst []byte, esc string) ([]byte, int, bool) {
	if len(esc) < 2 {
		return nil, 0, false
	}
	switch esc[1] {
	case '"', '\\', '/':
		return append(dst, esc[1]), 2, true
	case 'b':
		return append(dst, '\b'), 2, true
	case 'f':
		return append(dst, '\f'), 2, true
	case 'n':
		return append(dst, '\n'), 2, true
	case 'r':
		return append(dst, '\r'), 2, true
	case 't':
		return append(dst, '\t'), 2, true
	case 'u':
		r := hex4(esc)
		if r < 0 {
			return nil, 0, false
		}
		if utf16.IsSurrogate(r) {
			if pair := utf16.DecodeRune(r, hex4(esc[6:])); pair != unicode.ReplacementChar {
				return utf8.AppendRune(dst, pair), 12, true
			}
			r = unicode.ReplacementChar
		}
		return utf8.AppendRune(dst, r), 6, true
	}
	return nil, 0, false
}

// hex4 is the code unit of the \uXXXX escape starting esc, or -1.
func hex4(esc string) rune {
	if len(esc) < 6 || esc[0] != '\\' || esc[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range []byte(esc[2:6]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
