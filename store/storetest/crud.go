package storetest

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// everyType holds a value of each property type, at the edges where a codec
// loses types or precision: a float64 with no fraction (read back as int32 by
// a careless JSON codec), an int64 beyond 2^53 (rounded by one that goes
// through float64), times at 100 ns precision and at the ends of Edm.DateTime.
func everyType() store.Properties {
	return store.Properties{
		"Text":      "caméra ☃ 𝄞 it's",
		"EmptyText": "",
		"True":      true,
		"False":     false,
		"Int32":     int32(-7),
		"MinInt32":  int32(math.MinInt32),
		"MaxInt32":  int32(math.MaxInt32),
		"Int64":     int64(1<<53 + 1),
		"MinInt64":  int64(math.MinInt64),
		"MaxInt64":  int64(math.MaxInt64),
		"Whole":     2.0,
		"Fraction":  -0.1,
		"Tiny":      math.SmallestNonzeroFloat64,
		"Captured":  time.Date(2026, 1, 1, 0, 2, 59, 123456700, time.UTC),
		"Oldest":    time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC),
		"Newest":    time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC),
		"Binary":    []byte{0, 1, 2, 0xfe, 0xff},
	}
}

func testInsertGet(t *testing.T, h Harness) {
	t.Run("RoundTrip", func(t *testing.T) {
		tbl := newTable(t, h)
		for _, tc := range []struct {
			name  string
			key   key
			props store.Properties
		}{
			{"every type", key{"cam1", "2516350750799999999"}, everyType()},
			{"no properties", key{"cam1", "empty"}, nil},
			{"empty binary", key{"cam1", "empty binary"}, store.Properties{"Binary": []byte{}}},
			{"unicode and punctuation in keys", key{"caméra ☃ it's", "row 'one' ~!@$%^&*()=+[]{};:,.<>"}, store.Properties{"N": int32(1)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				inserted := mustInsert(t, tbl, entity(tc.key, tc.props))
				if keyOf(inserted) != tc.key {
					t.Errorf("Insert returned %s, want %s", keyOf(inserted), tc.key)
				}
				got := mustGet(t, tbl, tc.key)
				if got.ETag != inserted.ETag {
					t.Errorf("Get: ETag %q, want %q as Insert returned", got.ETag, inserted.ETag)
				}
				wantProps(t, "Get", got.Properties, tc.props)
				for name, v := range got.Properties {
					// Azure returns Edm.DateTime in UTC; a backend that hands
					// back local times makes formatting differ per machine.
					if tv, ok := v.(time.Time); ok && tv.Location() != time.UTC {
						t.Errorf("Get: property %s is in %s, want UTC", name, tv.Location())
					}
				}
			})
		}
	})

	t.Run("TakenKey", func(t *testing.T) {
		tbl := newTable(t, h)
		k := key{"cam1", "r1"}
		first := mustInsert(t, tbl, entity(k, store.Properties{"Version": int32(1)}))
		_, err := tbl.Insert(t.Context(), entity(k, store.Properties{"Version": int32(2), "Extra": true}))
		wantIs(t, "second Insert", err, store.ErrAlreadyExists)
		got := mustGet(t, tbl, k)
		if got.ETag != first.ETag {
			t.Errorf("Get after failed Insert: ETag %q, want %q", got.ETag, first.ETag)
		}
		wantProps(t, "Get after failed Insert", got.Properties, store.Properties{"Version": int32(1)})
	})

	t.Run("Missing", func(t *testing.T) {
		tbl := newTable(t, h)
		mustInsert(t, tbl, entity(key{"cam1", "r1"}, nil))
		for _, k := range []key{
			{"cam1", "r2"},  // partition exists, row does not
			{"cam2", "r1"},  // row key exists, in another partition
			{"cam", "r1"},   // a prefix of an existing partition
			{"cam1", "r10"}, // an existing row key is a prefix of it
		} {
			wantNotFound(t, tbl, k)
		}
	})
}

func testUpsert(t *testing.T, h Harness) {
	k := key{"cam1", "r1"}
	stored := store.Properties{"Kept": "old", "Changed": int32(1)}
	write := store.Properties{"Changed": int32(2), "Added": true}
	for _, tc := range []struct {
		name string
		mode store.WriteMode
		want store.Properties
	}{
		{"Merge", store.Merge, store.Properties{"Kept": "old", "Changed": int32(2), "Added": true}},
		{"Replace", store.Replace, write},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := newTable(t, h)
			inserted := mustInsert(t, tbl, entity(k, stored))
			upserted := mustUpsert(t, tbl, entity(k, write), tc.mode)
			if upserted.ETag == inserted.ETag {
				t.Errorf("Upsert kept ETag %q; every write must change it", upserted.ETag)
			}
			got := mustGet(t, tbl, k)
			if got.ETag != upserted.ETag {
				t.Errorf("Get: ETag %q, want %q as Upsert returned", got.ETag, upserted.ETag)
			}
			wantProps(t, "Get after Upsert", got.Properties, tc.want)
		})
		t.Run(tc.name+"CreatesMissing", func(t *testing.T) {
			tbl := newTable(t, h)
			upserted := mustUpsert(t, tbl, entity(k, write), tc.mode)
			got := mustGet(t, tbl, k)
			if got.ETag != upserted.ETag {
				t.Errorf("Get: ETag %q, want %q as Upsert returned", got.ETag, upserted.ETag)
			}
			wantProps(t, "Get after Upsert", got.Properties, write)
		})
	}

	t.Run("ETagPerWrite", func(t *testing.T) {
		tbl := newTable(t, h)
		seen := map[string]int{}
		modes := []store.WriteMode{store.Merge, store.Replace}
		for i := range 6 {
			// The same properties every time: the ETag names a write, not a content.
			e := mustUpsert(t, tbl, entity(k, store.Properties{"Same": true}), modes[i%len(modes)])
			if j, dup := seen[e.ETag]; dup {
				t.Errorf("write %d returned ETag %q of write %d", i, e.ETag, j)
			}
			seen[e.ETag] = i
		}
	})
}

func testUpdate(t *testing.T, h Harness) {
	k := key{"cam1", "r1"}
	stored := store.Properties{"Kept": "old", "Changed": int32(1)}
	write := store.Properties{"Changed": int32(2)}

	t.Run("Missing", func(t *testing.T) {
		tbl := newTable(t, h)
		for _, ifMatch := range []string{"", `W/"stale"`} {
			_, err := tbl.Update(t.Context(), entity(k, write), store.Merge, ifMatch)
			wantIs(t, fmt.Sprintf("Update(ifMatch %q) of a missing entity", ifMatch), err, store.ErrNotFound)
			wantNotFound(t, tbl, k)
		}
	})

	for _, tc := range []struct {
		name string
		mode store.WriteMode
		// ifMatch picks the condition from the entity's first and current ETags.
		ifMatch func(first, current string) string
		want    error
	}{
		{"MergeAnyETag", store.Merge, func(_, _ string) string { return "" }, nil},
		{"ReplaceAnyETag", store.Replace, func(_, _ string) string { return "" }, nil},
		{"CurrentETag", store.Merge, func(_, current string) string { return current }, nil},
		{"StaleETag", store.Merge, func(first, _ string) string { return first }, store.ErrConflict},
		{"StaleETagReplace", store.Replace, func(first, _ string) string { return first }, store.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := newTable(t, h)
			first := mustInsert(t, tbl, entity(k, store.Properties{"Kept": "older"}))
			current := mustUpsert(t, tbl, entity(k, stored), store.Replace)
			updated, err := tbl.Update(t.Context(), entity(k, write), tc.mode, tc.ifMatch(first.ETag, current.ETag))
			got := mustGet(t, tbl, k)
			if tc.want != nil {
				wantIs(t, "Update", err, tc.want)
				if got.ETag != current.ETag {
					t.Errorf("Get after failed Update: ETag %q, want %q", got.ETag, current.ETag)
				}
				wantProps(t, "Get after failed Update", got.Properties, stored)
				return
			}
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			wantStamped(t, "Update", updated)
			if updated.ETag == current.ETag {
				t.Errorf("Update kept ETag %q; every write must change it", updated.ETag)
			}
			if got.ETag != updated.ETag {
				t.Errorf("Get: ETag %q, want %q as Update returned", got.ETag, updated.ETag)
			}
			want := store.Properties{"Kept": "old", "Changed": int32(2)}
			if tc.mode == store.Replace {
				want = write
			}
			wantProps(t, "Get after Update", got.Properties, want)
		})
	}
}

func testDelete(t *testing.T, h Harness) {
	k := key{"cam1", "r1"}

	t.Run("Missing", func(t *testing.T) {
		tbl := newTable(t, h)
		mustInsert(t, tbl, entity(key{"cam1", "r2"}, nil))
		err := tbl.Delete(t.Context(), k.PartitionKey, k.RowKey, "")
		wantIs(t, "Delete of a missing entity", err, store.ErrNotFound)
	})

	t.Run("StaleETag", func(t *testing.T) {
		tbl := newTable(t, h)
		first := mustInsert(t, tbl, entity(k, store.Properties{"Version": int32(1)}))
		current := mustUpsert(t, tbl, entity(k, store.Properties{"Version": int32(2)}), store.Replace)
		err := tbl.Delete(t.Context(), k.PartitionKey, k.RowKey, first.ETag)
		wantIs(t, "Delete with a stale ETag", err, store.ErrConflict)
		if got := mustGet(t, tbl, k); got.ETag != current.ETag {
			t.Errorf("Get after failed Delete: ETag %q, want %q", got.ETag, current.ETag)
		}
	})

	for _, tc := range []struct {
		name    string
		ifMatch func(current string) string
	}{
		{"AnyETag", func(string) string { return "" }},
		{"CurrentETag", func(current string) string { return current }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := newTable(t, h)
			neighbour := key{"cam1", "r2"}
			current := mustInsert(t, tbl, entity(k, nil))
			mustInsert(t, tbl, entity(neighbour, nil))
			if err := tbl.Delete(t.Context(), k.PartitionKey, k.RowKey, tc.ifMatch(current.ETag)); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			wantNotFound(t, tbl, k)
			mustGet(t, tbl, neighbour)

			err := tbl.Delete(t.Context(), k.PartitionKey, k.RowKey, "")
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("second Delete: error %v, want %v", err, store.ErrNotFound)
			}
			// A deleted key is free again: no tombstone blocks an insert.
			mustInsert(t, tbl, entity(k, store.Properties{"Again": true}))
		})
	}
}
