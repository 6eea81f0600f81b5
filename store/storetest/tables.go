package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// testTableNames checks the table name rules and that tables share nothing,
// even when one name is a prefix of the other, the case a backend that
// prefixes keys with the table name gets wrong.
func testTableNames(t *testing.T, h Harness) {
	t.Run("Invalid", func(t *testing.T) {
		b := h(t)
		for _, tc := range []struct{ name, table string }{
			{"empty", ""},
			{"too short", "ab"},
			{"too long", "t" + strings.Repeat("a", 63)},
			{"starts with a digit", "1images"},
			{"dash", "image-index"},
			{"underscore", "image_index"},
			{"space", "image index"},
			{"non-ASCII letter", "imagé"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := b.Table(t.Context(), tc.table)
				wantIs(t, fmt.Sprintf("Table(%q)", tc.table), err, store.ErrInvalidKey)
			})
		}
	})

	t.Run("Valid", func(t *testing.T) {
		b := h(t)
		for _, name := range []string{"abc", "Images2026", "t" + strings.Repeat("a", 62)} {
			if _, err := b.Table(t.Context(), name); err != nil {
				t.Errorf("Table(%q): %v", name, err)
			}
		}
	})

	t.Run("Independent", func(t *testing.T) {
		b := h(t)
		first, second := openTable(t, b, "images"), openTable(t, b, "images2")
		k := key{"cam1", "r1"}
		mustInsert(t, first, entity(k, store.Properties{"Table": "images"}))
		mustInsert(t, second, entity(k, store.Properties{"Table": "images2"}))
		wantProps(t, "Get from images", mustGet(t, first, k).Properties, store.Properties{"Table": "images"})
		wantProps(t, "Get from images2", mustGet(t, second, k).Properties, store.Properties{"Table": "images2"})
		wantKeys(t, "Scan images", scanAll(t, first, store.Scan{}), []key{k})
		wantKeys(t, "Query images2", queryAll(t, second, store.Query{PartitionKey: k.PartitionKey}), []key{k})

		if err := first.Delete(t.Context(), k.PartitionKey, k.RowKey, ""); err != nil {
			t.Fatalf("Delete from images: %v", err)
		}
		wantNotFound(t, first, k)
		wantProps(t, "Get from images2 after delete from images", mustGet(t, second, k).Properties, store.Properties{"Table": "images2"})
	})

	// Azure table names are case-insensitive; a backend that keyed tables by
	// the name as given would split one table in two.
	t.Run("CaseInsensitive", func(t *testing.T) {
		b := h(t)
		upper, lower := openTable(t, b, "CasedImages"), openTable(t, b, "casedimages")
		k := key{"cam1", "r1"}
		mustInsert(t, upper, entity(k, store.Properties{"Via": "upper"}))
		wantProps(t, "Get through the lower-case name", mustGet(t, lower, k).Properties, store.Properties{"Via": "upper"})
		mustUpsert(t, lower, entity(k, store.Properties{"Via": "lower"}), store.Replace)
		wantKeys(t, "Scan through the upper-case name", scanAll(t, upper, store.Scan{}), []key{k})
		wantProps(t, "Get after a write through the lower-case name", mustGet(t, upper, k).Properties, store.Properties{"Via": "lower"})
		if upper.Name() != "CasedImages" {
			t.Errorf("Name() = %q, want the name as given", upper.Name())
		}
	})

	t.Run("Reopen", func(t *testing.T) {
		b := h(t)
		k := key{"cam1", "r1"}
		inserted := mustInsert(t, openTable(t, b, tableName), entity(k, nil))
		got := mustGet(t, openTable(t, b, tableName), k)
		if got.ETag != inserted.ETag {
			t.Errorf("Get through a second Table(%q): ETag %q, want %q", tableName, got.ETag, inserted.ETag)
		}
	})
}
