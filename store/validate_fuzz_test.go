package store

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// FuzzValidateEntity checks the one-pass entity check against the rules
// read one at a time, as ValidateKey and ValidateEntity read them before
// they measured the entity in the same pass: the same keys and strings
// pass, and a valid entity's measured size is EntitySize's.
func FuzzValidateEntity(f *testing.F) {
	f.Add("cam-0017", "2516925183999999999", "BlobUri", "https://blobs.example/x.jpg")
	f.Add("", "r", "N", "")
	f.Add("a/b", "r\x7f", "1st", "\xff")
	f.Add("p\u0085", "😀", "Ünïcode", "a\u2028b😀")
	f.Add("p", strings.Repeat("𝄞", MaxKeyBytes/4+1), "S", strings.Repeat("é", MaxValueBytes/2+1))
	f.Fuzz(func(t *testing.T, pk, rk, name, value string) {
		for _, key := range []string{pk, rk} {
			if got, want := ValidateKey(key) == nil, keyByRules(key); got != want {
				t.Fatalf("ValidateKey(%q) passes: %v; by the rules: %v", key, got, want)
			}
		}
		units, valid := stringUnits(value)
		if want := utf16.Encode([]rune(value)); units != len(want) || valid != utf8.ValidString(value) {
			t.Fatalf("stringUnits(%q) = %d, %v; want %d, %v", value, units, valid, len(want), utf8.ValidString(value))
		}
		e := Entity{PartitionKey: pk, RowKey: rk, Properties: Properties{name: value}}
		size, err := checkEntity(e)
		wantValid := keyByRules(pk) && keyByRules(rk) && !reservedProperties[name] && validPropertyName(name) &&
			2*utf16Len(value) <= MaxValueBytes && utf8.ValidString(value) && EntitySize(e) <= MaxEntityBytes
		if (err == nil) != wantValid {
			t.Fatalf("checkEntity(%#v): %v; valid by the rules: %v", e, err, wantValid)
		}
		var pe *PropertyError
		if err != nil && !errors.Is(err, ErrInvalidKey) && !errors.As(err, &pe) {
			t.Fatalf("checkEntity(%#v): %v is neither a key error nor a *PropertyError", e, err)
		}
		if err == nil && size != EntitySize(e) {
			t.Fatalf("checkEntity(%#v) measured %d; EntitySize is %d", e, size, EntitySize(e))
		}
	})
}

// keyByRules is whether key passes the key rules, each read on its own.
func keyByRules(key string) bool {
	return key != "" && utf8.ValidString(key) && 2*utf16Len(key) <= MaxKeyBytes &&
		strings.IndexFunc(key, forbiddenInKey) < 0
}
