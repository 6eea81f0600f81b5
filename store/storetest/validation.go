package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// invalidKeys break the key rules Azure Table Storage enforces; a backend that
// stored them would hold rows the scale-out backend cannot.
var invalidKeys = []struct{ name, key string }{
	{"empty", ""},
	{"slash", "a/b"},
	{"backslash", `a\b`},
	{"hash", "a#b"},
	{"question mark", "a?b"},
	{"NUL", "a\x00b"},
	{"newline", "a\nb"},
	{"DEL", "a\x7fb"},
	{"over 1 KiB as UTF-16", strings.Repeat("k", store.MaxKeyBytes/2+1)},
}

func testKeys(t *testing.T, h Harness) {
	t.Run("Invalid", func(t *testing.T) {
		tbl := newTable(t, h)
		for _, tc := range invalidKeys {
			t.Run(tc.name, func(t *testing.T) {
				for _, k := range []key{{tc.key, "row"}, {"partition", tc.key}} {
					for _, c := range []struct {
						name string
						call func(context.Context) error
					}{
						{"Insert", func(ctx context.Context) error { _, err := tbl.Insert(ctx, entity(k, nil)); return err }},
						{"Upsert", func(ctx context.Context) error { _, err := tbl.Upsert(ctx, entity(k, nil), store.Merge); return err }},
						{"Update", func(ctx context.Context) error {
							_, err := tbl.Update(ctx, entity(k, nil), store.Merge, "")
							return err
						}},
						{"Get", func(ctx context.Context) error { _, err := tbl.Get(ctx, k.PartitionKey, k.RowKey); return err }},
						{"Delete", func(ctx context.Context) error { return tbl.Delete(ctx, k.PartitionKey, k.RowKey, "") }},
					} {
						wantIs(t, fmt.Sprintf("%s of %s", c.name, k), c.call(t.Context()), store.ErrInvalidKey)
					}
				}
				if got := snapshot(t, tbl); len(got) > 0 {
					t.Errorf("rejected writes left %d entities, first %s", len(got), keyOf(got[0]))
				}
			})
		}
	})

	t.Run("Longest", func(t *testing.T) {
		tbl := newTable(t, h)
		for _, tc := range []struct{ name, key string }{
			{"512 ASCII characters", strings.Repeat("k", store.MaxKeyBytes/2)},
			{"512 characters of 2-byte runes", strings.Repeat("é", store.MaxKeyBytes/2)},
		} {
			k := key{tc.key, tc.key}
			mustInsert(t, tbl, entity(k, store.Properties{"Name": tc.name}))
			wantProps(t, "Get "+tc.name, mustGet(t, tbl, k).Properties, store.Properties{"Name": tc.name})
		}
	})
}

// oversized is an entity whose properties are each within limits but which
// is over MaxEntityBytes in all.
func oversized() store.Properties {
	props := store.Properties{}
	for i := range 20 {
		props[fmt.Sprintf("P%02d", i)] = strings.Repeat("x", 30000)
	}
	return props
}

func tooManyProperties() store.Properties {
	props := store.Properties{}
	for i := range store.MaxProperties + 1 {
		props[fmt.Sprintf("P%03d", i)] = int32(i)
	}
	return props
}

func testEntityLimits(t *testing.T, h Harness) {
	tbl := newTable(t, h)
	for _, tc := range []struct {
		name  string
		props store.Properties
		want  error // nil when the entity is within limits
		// property, when set, is what the *store.PropertyError must name.
		property string
	}{
		{"string of 64 KiB as UTF-16", store.Properties{"Big": strings.Repeat("a", store.MaxValueBytes/2)}, nil, ""},
		{"string over 64 KiB as UTF-16", store.Properties{"Big": strings.Repeat("a", store.MaxValueBytes/2+1)}, store.ErrTooLarge, "Big"},
		{"binary of 64 KiB", store.Properties{"Blob": make([]byte, store.MaxValueBytes)}, nil, ""},
		{"binary over 64 KiB", store.Properties{"Blob": make([]byte, store.MaxValueBytes+1)}, store.ErrTooLarge, "Blob"},
		{"entity over 1 MiB", oversized(), store.ErrTooLarge, ""},
		{"too many properties", tooManyProperties(), store.ErrTooLarge, ""},
		{"unsupported type int", store.Properties{"Count": 1}, store.ErrInvalidEntity, "Count"},
		{"unsupported type uint64", store.Properties{"Count": uint64(1)}, store.ErrInvalidEntity, "Count"},
		{"reserved Timestamp", store.Properties{"Timestamp": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, store.ErrInvalidEntity, "Timestamp"},
		{"reserved PartitionKey", store.Properties{"PartitionKey": "p"}, store.ErrInvalidEntity, "PartitionKey"},
		{"reserved ETag", store.Properties{"ETag": "e"}, store.ErrInvalidEntity, "ETag"},
		{"property name with dash", store.Properties{"bad-name": "x"}, store.ErrInvalidEntity, "bad-name"},
		{"NaN", store.Properties{"Price": math.NaN()}, store.ErrInvalidEntity, "Price"},
		{"time before 1601", store.Properties{"Captured": time.Date(1600, 12, 31, 0, 0, 0, 0, time.UTC)}, store.ErrInvalidEntity, "Captured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := key{"limits", tc.name}
			_, err := tbl.Insert(t.Context(), entity(k, tc.props))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Insert: %v", err)
				}
				wantProps(t, "Get", mustGet(t, tbl, k).Properties, tc.props)
				return
			}
			if !wantIs(t, "Insert", err, tc.want) {
				return
			}
			wantNotFound(t, tbl, k)
			if tc.property == "" {
				return
			}
			var pe *store.PropertyError
			switch {
			case !errors.As(err, &pe):
				t.Errorf("Insert: error %v is not a *store.PropertyError", err)
			case pe.Property != tc.property:
				t.Errorf("Insert: PropertyError names %q, want %q", pe.Property, tc.property)
			}
		})
	}

	t.Run("RejectedWriteKeepsEntity", func(t *testing.T) {
		k := key{"limits", "kept"}
		stored := mustInsert(t, tbl, entity(k, store.Properties{"Version": int32(1)}))
		_, err := tbl.Upsert(t.Context(), entity(k, oversized()), store.Merge)
		wantIs(t, "Upsert of an oversized entity", err, store.ErrTooLarge)
		_, err = tbl.Update(t.Context(), entity(k, store.Properties{"Count": 1}), store.Replace, "")
		wantIs(t, "Update with an int property", err, store.ErrInvalidEntity)
		got := mustGet(t, tbl, k)
		if got.ETag != stored.ETag {
			t.Errorf("Get after rejected writes: ETag %q, want %q", got.ETag, stored.ETag)
		}
		wantProps(t, "Get after rejected writes", got.Properties, store.Properties{"Version": int32(1)})
	})
}
