package storetest

import (
	"slices"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// newRangeDeleter opens a fresh table holding the ordering fixture and
// returns it as the store.RangeDeleter it implements.
func newRangeDeleter(t *testing.T, h Harness) (store.Table, store.RangeDeleter) {
	t.Helper()
	tbl := newFixture(t, h)
	rd, ok := tbl.(store.RangeDeleter)
	if !ok {
		t.Fatalf("table %T stopped implementing store.RangeDeleter", tbl)
	}
	return tbl, rd
}

func testRangeDeleter(t *testing.T, h Harness) {
	tbl := newTable(t, h)
	if _, ok := tbl.(store.RangeDeleter); !ok {
		t.Skipf("table %T does not implement store.RangeDeleter; callers fall back to query and batch deletes", tbl)
	}

	// The fixture's partitions are prefixes of each other, so a backend that
	// deletes by key prefix removes rows of "cam1" and "camé" with "cam".
	for _, tc := range []struct {
		name    string
		rows    store.Range
		deleted []string
	}{
		{"from and to", store.Range{From: "b", To: "c"}, []string{"b", "b0", "ba"}},
		{"bounds between keys", store.Range{From: "a0", To: "b00"}, []string{"b", "b0"}},
		{"open from", store.Range{To: "b0"}, []string{"a", "b"}},
		{"open to", store.Range{From: "c"}, []string{"c", "d", "é"}},
		{"whole partition", store.Range{}, fixtureRows},
		{"empty range", store.Range{From: "b", To: "b"}, nil},
		{"gap", store.Range{From: "bb", To: "c"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, rd := newRangeDeleter(t, h)
			removed, err := rd.DeleteRanges(t.Context(), []store.RowRange{{PartitionKey: "cam", Rows: tc.rows}})
			if err != nil {
				t.Fatalf("DeleteRanges: %v", err)
			}
			wantRemoved(t, removed, int64(len(tc.deleted)))
			gone := map[key]bool{}
			for _, k := range rows("cam", tc.deleted...) {
				gone[k] = true
			}
			var want []key
			for _, k := range fixture() {
				if !gone[k] {
					want = append(want, k)
				}
			}
			wantKeys(t, "Scan after DeleteRanges", scanAll(t, tbl, store.Scan{}), want)
		})
	}

	t.Run("EmptyPartition", func(t *testing.T) {
		tbl, rd := newRangeDeleter(t, h)
		removed, err := rd.DeleteRanges(t.Context(), []store.RowRange{{PartitionKey: "cam0"}})
		if err != nil {
			t.Fatalf("DeleteRanges of an empty partition: %v", err)
		}
		wantRemoved(t, removed, 0)
		wantKeys(t, "Scan after DeleteRanges", scanAll(t, tbl, store.Scan{}), fixture())
	})

	// A purge deletes the expired rows of many cameras in one call.
	t.Run("SeveralPartitions", func(t *testing.T) {
		tbl, rd := newRangeDeleter(t, h)
		removed, err := rd.DeleteRanges(t.Context(), []store.RowRange{
			{PartitionKey: "cam", Rows: store.Range{To: "b0"}},
			{PartitionKey: "camé"},
		})
		if err != nil {
			t.Fatalf("DeleteRanges: %v", err)
		}
		wantRemoved(t, removed, 2, int64(len(fixtureRows)))
		gone := map[key]bool{}
		for _, k := range append(rows("cam", "a", "b"), rows("camé", fixtureRows...)...) {
			gone[k] = true
		}
		var want []key
		for _, k := range fixture() {
			if !gone[k] {
				want = append(want, k)
			}
		}
		wantKeys(t, "Scan after DeleteRanges", scanAll(t, tbl, store.Scan{}), want)
	})

	t.Run("InvalidPartitionKey", func(t *testing.T) {
		tbl, rd := newRangeDeleter(t, h)
		_, err := rd.DeleteRanges(t.Context(), []store.RowRange{{PartitionKey: "cam"}, {PartitionKey: "bad/key"}})
		wantIs(t, "DeleteRanges with an invalid partition key", err, store.ErrInvalidKey)
		wantKeys(t, "Scan after a rejected DeleteRanges", scanAll(t, tbl, store.Scan{}), fixture())
	})

	t.Run("Fenced", func(t *testing.T) { testFencedDelete(t, h) })
}

// testFencedDelete: a fenced deletion of whole partitions removes exactly
// their rows when nothing wrote them since the fence, and nothing when any
// kind of write touched one of them: the purge relies on it to drop an
// index partition only as it read it.
func testFencedDelete(t *testing.T, h Harness) {
	without := func(ks []key, partitions ...string) []key {
		var out []key
		for _, k := range ks {
			if !slices.Contains(partitions, k.PartitionKey) {
				out = append(out, k)
			}
		}
		return out
	}
	t.Run("Unchanged", func(t *testing.T) {
		tbl, rd := newRangeDeleter(t, h)
		fence := rd.Fence()
		if err := rd.DeletePartitions(t.Context(), []string{"cam", "ca"}, fence); err != nil {
			t.Fatalf("DeletePartitions: %v", err)
		}
		// "cam1" and "camé" share "cam"'s prefix and stay.
		wantKeys(t, "Scan after DeletePartitions", scanAll(t, tbl, store.Scan{}), without(fixture(), "cam", "ca"))
		if err := rd.DeletePartitions(t.Context(), []string{"cam"}, rd.Fence()); err != nil {
			t.Fatalf("DeletePartitions of a partition already gone: %v", err)
		}
		if err := rd.DeletePartitions(t.Context(), nil, fence); err != nil {
			t.Fatalf("DeletePartitions of no partition: %v", err)
		}
	})
	writes := []struct {
		name  string
		write func(t *testing.T, tbl store.Table)
	}{
		{"insert", func(t *testing.T, tbl store.Table) { mustInsert(t, tbl, entity(key{"cam", "late"}, nil)) }},
		{"upsert", func(t *testing.T, tbl store.Table) { mustUpsert(t, tbl, entity(key{"cam", "a"}, nil), store.Replace) }},
		{"delete", func(t *testing.T, tbl store.Table) {
			if err := tbl.Delete(t.Context(), "cam", "a", ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"batch", func(t *testing.T, tbl store.Table) {
			if err := tbl.Batch(t.Context(), []store.Op{{Kind: store.OpInsert, Entity: entity(key{"cam", "late"}, nil)}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete ranges", func(t *testing.T, tbl store.Table) {
			if _, err := tbl.(store.RangeDeleter).DeleteRanges(t.Context(), []store.RowRange{{PartitionKey: "cam", Rows: store.Range{To: "b"}}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, w := range writes {
		t.Run("After "+w.name, func(t *testing.T) {
			tbl, rd := newRangeDeleter(t, h)
			fence := rd.Fence()
			w.write(t, tbl)
			before := snapshot(t, tbl)
			err := rd.DeletePartitions(t.Context(), []string{"ca", "cam"}, fence)
			wantIs(t, "DeletePartitions after a write since the fence", err, store.ErrConflict)
			wantUnchanged(t, "DeletePartitions refused", tbl, before)
			if err := rd.DeletePartitions(t.Context(), []string{"ca", "cam"}, rd.Fence()); err != nil {
				t.Fatalf("DeletePartitions with a fence taken after the write: %v", err)
			}
			wantKeys(t, "Scan after DeletePartitions", scanAll(t, tbl, store.Scan{}), without(fixture(), "cam", "ca"))
		})
	}
	t.Run("InvalidPartitionKey", func(t *testing.T) {
		tbl, rd := newRangeDeleter(t, h)
		err := rd.DeletePartitions(t.Context(), []string{"cam", "bad/key"}, rd.Fence())
		wantIs(t, "DeletePartitions with an invalid partition key", err, store.ErrInvalidKey)
		wantKeys(t, "Scan after a rejected DeletePartitions", scanAll(t, tbl, store.Scan{}), fixture())
	})
}

// wantRemoved checks DeleteRanges' counts of removed entities, one per range.
func wantRemoved(t *testing.T, got []int64, want ...int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("DeleteRanges reported %v entities removed, want %v", got, want)
	}
}

func testKeyDeleter(t *testing.T, h Harness) {
	tbl := newFixture(t, h)
	kd, ok := tbl.(store.KeyDeleter)
	if !ok {
		t.Skipf("table %T does not implement store.KeyDeleter; callers fall back to batch deletes", tbl)
	}
	doomed := keyDeletes(store.Key{PartitionKey: "cam", RowKey: "b"}, store.Key{PartitionKey: "camé", RowKey: "a"}, store.Key{PartitionKey: "cam", RowKey: "missing"})
	if err := kd.DeleteKeys(t.Context(), doomed); err != nil {
		t.Fatalf("DeleteKeys: %v", err)
	}
	if err := kd.DeleteKeys(t.Context(), doomed); err != nil {
		t.Fatalf("DeleteKeys of keys already gone: %v, want nil", err)
	}
	gone := map[key]bool{{"cam", "b"}: true, {"camé", "a"}: true}
	var want []key
	for _, k := range fixture() {
		if !gone[k] {
			want = append(want, k)
		}
	}
	wantKeys(t, "Scan after DeleteKeys", scanAll(t, tbl, store.Scan{}), want)

	err := kd.DeleteKeys(t.Context(), keyDeletes(store.Key{PartitionKey: "cam", RowKey: "c"}, store.Key{PartitionKey: "cam", RowKey: "bad#key"}))
	wantIs(t, "DeleteKeys with an invalid key", err, store.ErrInvalidKey)
	wantKeys(t, "Scan after a rejected DeleteKeys", scanAll(t, tbl, store.Scan{}), want)

	// A caller that read a row deletes that version only: a row written
	// since its read stays, and so does every other row of the call.
	t.Run("IfMatch", func(t *testing.T) {
		tbl := newFixture(t, h)
		kd := tbl.(store.KeyDeleter)
		read, err := tbl.Get(t.Context(), "cam", "c")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Update(t.Context(), store.Entity{PartitionKey: "cam", RowKey: "c", Properties: store.Properties{"V": int32(7)}}, store.Merge, ""); err != nil {
			t.Fatal(err)
		}
		other, err := tbl.Get(t.Context(), "cam", "d")
		if err != nil {
			t.Fatal(err)
		}
		deletes := []store.KeyDelete{
			{Key: store.Key{PartitionKey: "cam", RowKey: "d"}, IfMatch: other.ETag},
			{Key: store.Key{PartitionKey: "cam", RowKey: "c"}, IfMatch: read.ETag},
		}
		err = kd.DeleteKeys(t.Context(), deletes)
		wantBatchError(t, "DeleteKeys of a row written since its read", err, 1, store.ErrConflict)
		wantKeys(t, "Scan after a DeleteKeys with a stale ETag", scanAll(t, tbl, store.Scan{}), fixture())

		current, err := tbl.Get(t.Context(), "cam", "c")
		if err != nil {
			t.Fatal(err)
		}
		deletes[1].IfMatch = current.ETag
		deletes = append(deletes, store.KeyDelete{Key: store.Key{PartitionKey: "cam", RowKey: "missing"}, IfMatch: read.ETag})
		if err := kd.DeleteKeys(t.Context(), deletes); err != nil {
			t.Fatalf("DeleteKeys with current ETags and a key already gone: %v", err)
		}
		var want []key
		for _, k := range fixture() {
			if k != (key{"cam", "c"}) && k != (key{"cam", "d"}) {
				want = append(want, k)
			}
		}
		wantKeys(t, "Scan after DeleteKeys with current ETags", scanAll(t, tbl, store.Scan{}), want)
	})
}

// keyDeletes are unconditional deletes of the keys.
func keyDeletes(keys ...store.Key) []store.KeyDelete {
	out := make([]store.KeyDelete, len(keys))
	for i, k := range keys {
		out[i] = store.KeyDelete{Key: k}
	}
	return out
}

func testCounter(t *testing.T, h Harness) {
	tbl := newFixture(t, h)
	c, ok := tbl.(store.Counter)
	if !ok {
		t.Skipf("table %T does not implement store.Counter; callers count by reading", tbl)
	}
	for _, tc := range []struct {
		name      string
		partition string
		rows      store.Range
		want      int64
	}{
		{"whole partition", "cam", store.Range{}, int64(len(fixtureRows))},
		{"bounded", "cam", store.Range{From: "b", To: "c"}, 3},
		{"open from", "cam1", store.Range{To: "b0"}, 2},
		{"empty range", "cam", store.Range{From: "c", To: "c"}, 0},
		{"empty partition", "cam0", store.Range{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := c.CountRows(t.Context(), tc.partition, tc.rows)
			if err != nil || n != tc.want {
				t.Fatalf("CountRows(%q, %+v) = %d, %v; want %d", tc.partition, tc.rows, n, err, tc.want)
			}
		})
	}
	_, err := c.CountRows(t.Context(), "bad#key", store.Range{})
	wantIs(t, "CountRows of an invalid partition key", err, store.ErrInvalidKey)
}
