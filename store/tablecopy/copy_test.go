package tablecopy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/tablecopy"
)

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// tables are copied in this order: the index before its primary table.
var tables = []string{"AlphaIndex", "Alpha", "Beta"}

func openPebble(t *testing.T) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openAzure(t *testing.T) store.Backend {
	t.Helper()
	var id [5]byte
	_, _ = rand.Read(id[:])
	b, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: azurite.Require(t),
		TablePrefix: "t" + hex.EncodeToString(id[:]), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seed writes rows of every property type into each table: three
// partitions of 130 rows, so batches and pages split inside partitions.
func seed(t *testing.T, b store.Backend) {
	t.Helper()
	at := store.TruncateToTicks(time.Date(2026, 1, 2, 3, 4, 5, 678912300, time.UTC))
	for ti, name := range tables {
		tbl, err := b.Table(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		for p := range 3 {
			var ops []store.Op
			for r := range 130 {
				e := store.Entity{PartitionKey: fmt.Sprintf("p%d", p), RowKey: fmt.Sprintf("r%04d", r), Properties: store.Properties{
					"S": fmt.Sprintf("%s-%d-%d", name, p, r), "I32": int32(r), "I64": int64(r) << 40, "B": r%2 == 0,
					"F": float64(r) / 3, "T": at.Add(time.Duration(r) * time.Minute), "Bin": []byte{byte(ti), byte(p), byte(r)}}}
				ops = append(ops, store.Op{Kind: store.OpUpsert, Mode: store.Replace, Entity: e})
				if len(ops) == 100 || r == 129 {
					if err := tbl.Batch(t.Context(), ops); err != nil {
						t.Fatal(err)
					}
					ops = nil
				}
			}
		}
	}
}

// rows reads a table whole, in key order.
func rows(t *testing.T, b store.Backend, name string) []store.Entity {
	t.Helper()
	tbl, err := b.Table(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	var all []store.Entity
	scan := store.Scan{}
	for {
		page, err := tbl.Scan(t.Context(), scan)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Entities...)
		if page.Next == nil {
			return all
		}
		scan.Resume = page.Next
	}
}

// requireSameTables fails unless every table holds the same keys with the
// same properties, of the same types, in both backends.
func requireSameTables(t *testing.T, want, got store.Backend) {
	t.Helper()
	for _, name := range tables {
		w, g := rows(t, want, name), rows(t, got, name)
		if len(w) != len(g) {
			t.Fatalf("table %s: %d rows, want %d", name, len(g), len(w))
		}
		for i := range w {
			if w[i].PartitionKey != g[i].PartitionKey || w[i].RowKey != g[i].RowKey || !store.EqualProperties(w[i].Properties, g[i].Properties) {
				t.Fatalf("table %s row %d: %s/%s %v, want %s/%s %v", name, i, g[i].PartitionKey, g[i].RowKey, g[i].Properties,
					w[i].PartitionKey, w[i].RowKey, w[i].Properties)
			}
		}
	}
}

func run(t *testing.T, from, to store.Backend, source string) (*tablecopy.Report, error) {
	t.Helper()
	return tablecopy.Run(t.Context(), tablecopy.Options{From: from, To: to, Source: source, Tables: tables, PageSize: 64})
}

// TestRoundTripThroughAzure: embedded -> Azure Table Storage -> embedded
// gives identical tables, keys, properties and types, each copy verified.
func TestRoundTripThroughAzure(t *testing.T) {
	first, azure, last := openPebble(t), openAzure(t), openPebble(t)
	seed(t, first)
	out, err := run(t, first, azure, "embedded:first")
	if err != nil {
		t.Fatalf("copy to Azure: %v", err)
	}
	back, err := run(t, azure, last, "azure:test")
	if err != nil {
		t.Fatalf("copy back: %v", err)
	}
	requireSameTables(t, first, azure)
	requireSameTables(t, first, last)
	for _, r := range []*tablecopy.Report{out, back} {
		if r.Rows != int64(len(tables)*3*130) {
			t.Errorf("copied %d rows, want %d", r.Rows, len(tables)*3*130)
		}
		for _, tr := range r.Tables {
			if tr.SourceRows != 390 || tr.TargetRows != 390 || tr.Sampled != tablecopy.DefaultVerifySample || len(tr.Mismatches) > 0 {
				t.Errorf("verification of %s: %+v", tr.Table, tr)
			}
		}
	}
	t.Logf("to Azurite: %d rows, %d reads and %d writes: %.3f storage operations per row",
		out.Rows, out.Reads, out.Writes, float64(out.Reads+out.Writes)/float64(out.Rows))
}

// failingBackend fails the target's writes from the n-th on: the copy is
// interrupted there, as by a crash or a lost connection.
type failingBackend struct {
	store.Backend
	n      int64
	writes atomic.Int64
}

var errInterrupted = errors.New("interrupted")

func (b *failingBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	return &failingTable{Table: t, b: b}, err
}

type failingTable struct {
	store.Table
	b *failingBackend
}

func (f *failingTable) fail() error {
	if f.b.writes.Add(1) >= f.b.n {
		return errInterrupted
	}
	return nil
}

func (f *failingTable) Batch(ctx context.Context, ops []store.Op) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Table.Batch(ctx, ops)
}

func (f *failingTable) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	if err := f.fail(); err != nil {
		return store.Entity{}, err
	}
	return f.Table.Upsert(ctx, e, mode)
}

// TestInterruptedCopyResumes: a copy interrupted at random points, each
// run going a little further, ends with the same tables as one that never
// stopped, on each kind of target; runs after the first resume from the
// recorded position instead of starting over.
func TestInterruptedCopyResumes(t *testing.T) {
	for _, target := range []struct {
		name string
		open func(t *testing.T) store.Backend
	}{
		{"embedded", func(t *testing.T) store.Backend { return openPebble(t) }},
		{"azure", openAzure},
	} {
		t.Run(target.name, func(t *testing.T) {
			from, to := openPebble(t), target.open(t)
			seed(t, from)
			interruptions, resumed := 0, false
			for {
				// The whole copy takes about 30 writes: stop at a random one of them.
				r, err := run(t, from, &failingBackend{Backend: to, n: 1 + mrand.Int64N(12)}, "embedded:from")
				if err == nil {
					break
				}
				if !errors.Is(err, errInterrupted) {
					t.Fatalf("run %d: %v", interruptions, err)
				}
				interruptions++
				for _, tr := range r.Tables {
					resumed = resumed || tr.Resumed
				}
				if interruptions > 100 {
					t.Fatal("the copy makes no progress across interruptions")
				}
			}
			if !resumed {
				t.Error("no run resumed from a recorded position")
			}
			requireSameTables(t, from, to)
			t.Logf("finished after %d interruptions", interruptions)
		})
	}
}

// TestCopyRunTwiceChangesNothing: a second copy of the same source finds
// every table done and writes nothing: the target's rows keep their
// versions.
func TestCopyRunTwiceChangesNothing(t *testing.T) {
	from, to := openPebble(t), openAzure(t)
	seed(t, from)
	if _, err := run(t, from, to, "embedded:from"); err != nil {
		t.Fatal(err)
	}
	before := map[string][]store.Entity{}
	for _, name := range tables {
		before[name] = rows(t, to, name)
	}
	again, err := run(t, from, to, "embedded:from")
	if err != nil {
		t.Fatal(err)
	}
	if again.Rows != 0 {
		t.Errorf("the second run copied %d rows", again.Rows)
	}
	for _, tr := range again.Tables {
		if !tr.AlreadyDone {
			t.Errorf("table %s not found done: %+v", tr.Table, tr)
		}
	}
	for _, name := range tables {
		after := rows(t, to, name)
		for i := range after {
			if after[i].ETag != before[name][i].ETag {
				t.Fatalf("table %s row %s/%s was written again", name, after[i].PartitionKey, after[i].RowKey)
			}
		}
	}
}

// TestVerificationFindsADifference: a target row changed behind the copy's
// back fails the verification of its table, naming the table.
func TestVerificationFindsADifference(t *testing.T) {
	from, to := openPebble(t), openPebble(t)
	seed(t, from)
	if _, err := run(t, from, to, "embedded:from"); err != nil {
		t.Fatal(err)
	}
	beta, _ := to.Table(t.Context(), "Beta")
	if _, err := beta.Insert(t.Context(), store.Entity{PartitionKey: "p9", RowKey: "extra"}); err != nil {
		t.Fatal(err)
	}
	r, err := run(t, from, to, "embedded:from")
	if !errors.Is(err, tablecopy.ErrMismatch) {
		t.Fatalf("copy onto a changed target: %v, want ErrMismatch", err)
	}
	last := r.Tables[len(r.Tables)-1]
	if last.Table != "Beta" || last.TargetRows != 391 || len(last.Mismatches) == 0 {
		t.Errorf("report of Beta: %+v", last)
	}
}
