package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
)

// tableName names the table of the tests that need only one.
const tableName = "entities"

// key is an entity's address, kept apart from the entity so that expected
// orders read as plain lists.
type key struct{ PartitionKey, RowKey string }

func (k key) String() string { return fmt.Sprintf("%q/%q", clip(k.PartitionKey), clip(k.RowKey)) }

func keyOf(e store.Entity) key { return key{e.PartitionKey, e.RowKey} }

func keysOf(es []store.Entity) []key {
	ks := make([]key, len(es))
	for i, e := range es {
		ks[i] = keyOf(e)
	}
	return ks
}

// rows is the keys of the given rows of one partition, in the order given.
func rows(partitionKey string, rowKeys ...string) []key {
	ks := make([]key, len(rowKeys))
	for i, rk := range rowKeys {
		ks[i] = key{partitionKey, rk}
	}
	return ks
}

func compareKeys(a, b key) int {
	if a.PartitionKey != b.PartitionKey {
		if a.PartitionKey < b.PartitionKey {
			return -1
		}
		return 1
	}
	switch {
	case a.RowKey < b.RowKey:
		return -1
	case a.RowKey > b.RowKey:
		return 1
	}
	return 0
}

func entity(k key, props store.Properties) store.Entity {
	return store.Entity{PartitionKey: k.PartitionKey, RowKey: k.RowKey, Properties: props}
}

// newTable opens a fresh backend and its table tableName.
func newTable(t *testing.T, h Harness) store.Table {
	t.Helper()
	return openTable(t, h(t), tableName)
}

func openTable(t *testing.T, b store.Backend, name string) store.Table {
	t.Helper()
	tbl, err := b.Table(t.Context(), name)
	if err != nil {
		t.Fatalf("Table(%q): %v", name, err)
	}
	return tbl
}

// wantStamped checks what the backend owes every entity it returns: an ETag
// for optimistic concurrency and the time of its last write.
func wantStamped(t *testing.T, what string, e store.Entity) {
	t.Helper()
	if e.ETag == "" {
		t.Errorf("%s: %s has an empty ETag", what, keyOf(e))
	}
	if e.Timestamp.IsZero() {
		t.Errorf("%s: %s has a zero Timestamp", what, keyOf(e))
	}
}

func mustInsert(t *testing.T, tbl store.Table, e store.Entity) store.Entity {
	t.Helper()
	got, err := tbl.Insert(t.Context(), e)
	if err != nil {
		t.Fatalf("Insert(%s): %v", keyOf(e), err)
	}
	wantStamped(t, "Insert", got)
	return got
}

func mustUpsert(t *testing.T, tbl store.Table, e store.Entity, mode store.WriteMode) store.Entity {
	t.Helper()
	got, err := tbl.Upsert(t.Context(), e, mode)
	if err != nil {
		t.Fatalf("Upsert(%s): %v", keyOf(e), err)
	}
	wantStamped(t, "Upsert", got)
	return got
}

func mustGet(t *testing.T, tbl store.Table, k key) store.Entity {
	t.Helper()
	got, err := tbl.Get(t.Context(), k.PartitionKey, k.RowKey)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	if keyOf(got) != k {
		t.Errorf("Get(%s) returned %s", k, keyOf(got))
	}
	wantStamped(t, "Get", got)
	return got
}

// insertAll inserts one entity per key, each with a Row property naming its
// key, so that a returned entity can be told from its neighbours.
func insertAll(t *testing.T, tbl store.Table, ks []key) {
	t.Helper()
	for _, k := range ks {
		mustInsert(t, tbl, entity(k, rowProps(k)))
	}
}

func rowProps(k key) store.Properties { return store.Properties{"Row": k.RowKey} }

// batchInsertAll is insertAll in batches of MaxBatchOps, for tests that need
// thousands of entities; ks must group the rows of a partition together.
func batchInsertAll(t *testing.T, tbl store.Table, ks []key) {
	t.Helper()
	var ops []store.Op
	flush := func() {
		if err := tbl.Batch(t.Context(), ops); err != nil {
			t.Fatalf("Batch of %d inserts into partition %q: %v", len(ops), ops[0].Entity.PartitionKey, err)
		}
		ops = ops[:0]
	}
	for _, k := range ks {
		if len(ops) == store.MaxBatchOps || len(ops) > 0 && ops[0].Entity.PartitionKey != k.PartitionKey {
			flush()
		}
		ops = append(ops, store.Op{Kind: store.OpInsert, Entity: entity(k, rowProps(k))})
	}
	if len(ops) > 0 {
		flush()
	}
}

func wantNotFound(t *testing.T, tbl store.Table, k key) {
	t.Helper()
	_, err := tbl.Get(t.Context(), k.PartitionKey, k.RowKey)
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(%s): error %v, want %v", k, err, store.ErrNotFound)
	}
}

// wantIs reports err unless it wraps target; it returns whether it does so
// that callers can skip checks that would only repeat the failure.
func wantIs(t *testing.T, what string, err, target error) bool {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one wrapping %v", what, err, target)
		return false
	}
	return true
}

// wantBatchError checks that err is a *store.BatchError naming the operation
// at index and wrapping target.
func wantBatchError(t *testing.T, what string, err error, index int, target error) {
	t.Helper()
	if !wantIs(t, what, err, target) {
		return
	}
	var be *store.BatchError
	if !errors.As(err, &be) {
		t.Errorf("%s: error %v is not a *store.BatchError", what, err)
		return
	}
	if be.Index != index {
		t.Errorf("%s: BatchError.Index = %d, want %d", what, be.Index, index)
	}
}

// wantProps compares property sets name by name, type included, so that an
// int32 read back as an int64 or a float64 as an int32 shows up.
func wantProps(t *testing.T, what string, got, want store.Properties) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: property %s missing, want %s", what, name, show(w))
		case !store.EqualValues(g, w):
			t.Errorf("%s: property %s = %s, want %s", what, name, show(g), show(w))
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected property %s = %s", what, name, show(g))
		}
	}
}

// show prints a property value with its type, clipped: limit tests use
// values of 64 KiB.
func show(v any) string {
	if tv, ok := v.(time.Time); ok {
		return fmt.Sprintf("time.Time(%s)", tv.Format(time.RFC3339Nano))
	}
	return clip(fmt.Sprintf("%T(%v)", v, v))
}

func clip(s string) string {
	const keep = 80
	if len(s) <= keep {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:keep], len(s))
}

// wantKeys compares the keys of entities with want, in order, reporting the
// first difference rather than two lists of thousands of keys.
func wantKeys(t *testing.T, what string, got []store.Entity, want []key) {
	t.Helper()
	gk := keysOf(got)
	for i := range min(len(gk), len(want)) {
		if gk[i] != want[i] {
			t.Errorf("%s: entity %d is %s, want %s (got %d entities, want %d)", what, i, gk[i], want[i], len(gk), len(want))
			return
		}
	}
	switch {
	case len(gk) > len(want):
		t.Errorf("%s: %d entities, want %d; first extra %s", what, len(gk), len(want), gk[len(want)])
	case len(gk) < len(want):
		t.Errorf("%s: %d entities, want %d; first missing %s", what, len(gk), len(want), want[len(gk)])
	}
}

// readAll follows a query or scan from its first page to its last. It checks
// what every page promises: at most limit entities, each stamped, and a Next
// that moves past the page's Resume, so that a caller looping while Next is
// non-nil terminates. A page may be empty while Next is set.
func readAll(t *testing.T, limit int, read func(resume *store.Cursor) (store.Page, error)) (entities []store.Entity, pages int) {
	t.Helper()
	if limit == 0 {
		limit = store.MaxPageSize
	}
	var resume *store.Cursor
	for {
		page, err := read(resume)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		if len(page.Entities) > limit {
			t.Fatalf("page %d holds %d entities, over the limit %d", pages, len(page.Entities), limit)
		}
		for _, e := range page.Entities {
			wantStamped(t, fmt.Sprintf("page %d", pages), e)
		}
		entities = append(entities, page.Entities...)
		if page.Next == nil {
			return entities, pages
		}
		if resume != nil && compareKeys(key(*resume), key(*page.Next)) >= 0 {
			t.Fatalf("page %d: Next %s does not move past Resume %s", pages, key(*page.Next), key(*resume))
		}
		resume = page.Next
	}
}

func queryAll(t *testing.T, tbl store.Table, q store.Query) []store.Entity {
	t.Helper()
	es, _ := readAll(t, q.Limit, func(resume *store.Cursor) (store.Page, error) {
		q.Resume = resume
		return tbl.Query(t.Context(), q)
	})
	return es
}

func scanAll(t *testing.T, tbl store.Table, s store.Scan) []store.Entity {
	t.Helper()
	es, _ := readAll(t, s.Limit, func(resume *store.Cursor) (store.Page, error) {
		s.Resume = resume
		return tbl.Scan(t.Context(), s)
	})
	return es
}

// snapshot is every entity of tbl, to show later that a rejected write
// changed nothing.
func snapshot(t *testing.T, tbl store.Table) []store.Entity {
	t.Helper()
	return scanAll(t, tbl, store.Scan{})
}

// wantUnchanged checks that tbl holds exactly the entities of before, with
// the same ETags and properties.
func wantUnchanged(t *testing.T, what string, tbl store.Table, before []store.Entity) {
	t.Helper()
	after := snapshot(t, tbl)
	wantKeys(t, what+": table changed", after, keysOf(before))
	now := make(map[key]store.Entity, len(after))
	for _, e := range after {
		now[keyOf(e)] = e
	}
	for _, b := range before {
		e, ok := now[keyOf(b)]
		if !ok {
			continue
		}
		if e.ETag != b.ETag {
			t.Errorf("%s: %s ETag changed from %q to %q", what, keyOf(e), b.ETag, e.ETag)
		}
		wantProps(t, fmt.Sprintf("%s: %s", what, keyOf(e)), e.Properties, b.Properties)
	}
}
