package observed_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/observed"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/storetest"
)

func openPebble(t *testing.T) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformance runs the store contract against wrapped Pebble: the
// wrapper keeps every rule, fast paths and cross-table transactions included.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		return observed.Backend(openPebble(t), observed.Options{Name: "embedded", Metrics: observed.NewMetrics(prometheus.NewRegistry())})
	})
}

func TestKeepsFastPaths(t *testing.T) {
	b := observed.Backend(openPebble(t), observed.Options{Name: "embedded", Metrics: observed.NewMetrics(prometheus.NewRegistry())})
	if _, ok := b.(store.Transactor); !ok {
		t.Error("wrapped Pebble backend lost store.Transactor")
	}
	tbl, err := b.Table(t.Context(), "Things")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.(store.Counter); !ok {
		t.Error("wrapped table lost store.Counter")
	}
	if _, ok := tbl.(store.Walker); !ok {
		t.Error("wrapped table lost store.Walker")
	}
}

// plainBackend hides Pebble's optional interfaces.
type plainBackend struct{ inner store.Backend }

func (p plainBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := p.inner.Table(ctx, name)
	return struct{ store.Table }{t}, err
}

func TestAddsNoFastPaths(t *testing.T) {
	b := observed.Backend(plainBackend{openPebble(t)}, observed.Options{Name: "plain", Metrics: observed.NewMetrics(prometheus.NewRegistry())})
	if _, ok := b.(store.Transactor); ok {
		t.Error("wrapper of a backend without transactions claims store.Transactor")
	}
	tbl, err := b.Table(t.Context(), "Things")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.(store.Counter); ok {
		t.Error("wrapper of a plain table claims store.Counter")
	}
	if _, ok := tbl.(store.Walker); ok {
		t.Error("wrapper of a plain table claims store.Walker")
	}
}

// TestRecordsLatencyAndErrors: each operation is timed; its failures are
// counted by kind, a get that finds no row aside (every create asks one).
func TestRecordsLatencyAndErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := observed.Backend(openPebble(t), observed.Options{Name: "embedded", Metrics: observed.NewMetrics(reg)})
	tbl, err := b.Table(t.Context(), "Things")
	if err != nil {
		t.Fatal(err)
	}
	e := store.Entity{PartitionKey: "p", RowKey: "r", Properties: store.Properties{"N": int32(1)}}
	if _, err := tbl.Insert(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Insert(t.Context(), e); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second insert: %v, want ErrAlreadyExists", err)
	}
	if _, err := tbl.Get(t.Context(), "p", "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get: %v, want ErrNotFound", err)
	}
	if err := tbl.Delete(t.Context(), "p", "missing", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete: %v, want ErrNotFound", err)
	}
	if n, err := tbl.(store.Counter).CountRows(t.Context(), "p", store.Range{}); err != nil || n != 1 {
		t.Fatalf("CountRows = %d, %v; want 1", n, err)
	}
	walked := 0
	if _, err := tbl.(store.Walker).Walk(t.Context(), store.Scan{Limit: 10}, func(string, string, iter.Seq2[string, store.Value]) error {
		walked++
		return nil
	}); err != nil || walked != 1 {
		t.Fatalf("Walk read %d rows, %v; want 1", walked, err)
	}
	want := `
# HELP metadatad_store_operation_errors_total Store operations that failed, by backend, operation and kind of error. not_found, already_exists, conflict and invalid are answers of the contract; failure is the one to alert on. A get that finds no row is an answer, not counted: every create reads whether its image exists.
# TYPE metadatad_store_operation_errors_total counter
metadatad_store_operation_errors_total{backend="embedded",error="already_exists",operation="insert"} 1
metadatad_store_operation_errors_total{backend="embedded",error="not_found",operation="delete"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "metadatad_store_operation_errors_total"); err != nil {
		t.Error(err)
	}
	if got, err := testutil.GatherAndCount(reg, "metadatad_store_operation_duration_seconds"); err != nil || got != 5 {
		t.Errorf("%d duration series (%v), want 5: insert, get, delete, count_rows, walk", got, err)
	}
	for op, n := range map[string]int{"insert": 2, "get": 1, "delete": 1, "count_rows": 1, "walk": 1} {
		if c := histogramCount(t, reg, op); c != uint64(n) {
			t.Errorf("%s observed %d times, want %d", op, c, n)
		}
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, operation string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "metadatad_store_operation_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == operation {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestSpansOnlyWithinATrace: a call within a span gets a child span; a call
// outside any trace (a background poll) makes none.
func TestSpansOnlyWithinATrace(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	b := observed.Backend(openPebble(t), observed.Options{Name: "embedded", Tracer: tp.Tracer("store")})
	tbl, err := b.Table(t.Context(), "Things")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Get(t.Context(), "p", "r"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get outside a trace: %v", err)
	}
	if n := len(recorder.Ended()); n != 0 {
		t.Fatalf("%d spans from a call outside any trace, want 0", n)
	}
	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	if _, err := tbl.Get(ctx, "p", "r"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get within a trace: %v", err)
	}
	parent.End()
	var get sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		if s.Name() == "store.get" {
			get = s
		}
	}
	if get == nil || get.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatal("no store.get span under the caller's")
	}
	// Not found is an answer, not a fault.
	if get.Status().Code == codes.Error {
		t.Errorf("a not-found get has error status %v", get.Status())
	}
	attrs := map[string]string{}
	for _, a := range get.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["db.collection.name"] != "Things" || attrs["error.type"] != "not_found" {
		t.Errorf("span attributes %v, want the table and error.type not_found", attrs)
	}
}

// TestForwardsPurger: the wrapper of a Purger is one, forwards its calls
// and the stage's batch, and records Exclusive as "purge".
func TestForwardsPurger(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := observed.Backend(openPebble(t), observed.Options{Name: "embedded", Metrics: observed.NewMetrics(reg)})
	p, ok := b.(store.Purger)
	if !ok {
		t.Fatal("wrapped Pebble backend lost store.Purger")
	}
	if _, ok := b.(store.Transactor); !ok {
		t.Fatal("wrapped Pebble backend lost store.Transactor")
	}
	ctx := t.Context()
	images, _ := b.Table(ctx, "Images")
	things, _ := b.Table(ctx, "Things")
	if err := p.Tally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	if err := p.AwaitTally(ctx, images.Name()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	if _, err := images.Insert(ctx, store.Entity{PartitionKey: "cam", RowKey: store.InvertedTicksRowKey(at)}); err != nil {
		t.Fatal(err)
	}
	var total int64
	err := p.Exclusive(ctx, time.Time{}, func(ctx context.Context, pb store.PurgeBatch) error {
		if err := pb.Tallies(ctx, images.Name(), store.Range{}, at, func(d *store.DayTally) error { total += d.Total(); return nil }); err != nil {
			return err
		}
		_, err := pb.Put(things.Name(), store.Entity{PartitionKey: "p", RowKey: "r"})
		return err
	})
	if err != nil || total != 1 {
		t.Fatalf("Exclusive: %v, total %d; want 1 row tallied", err, total)
	}
	if _, err := things.Get(ctx, "p", "r"); err != nil {
		t.Fatalf("the put: %v", err)
	}
	if c := histogramCount(t, reg, "purge"); c != 1 {
		t.Errorf("purge observed %d times, want 1", c)
	}
	if _, ok := observed.Backend(plainBackend{openPebble(t)}, observed.Options{Name: "plain"}).(store.Purger); ok {
		t.Error("wrapper of a backend without purges claims store.Purger")
	}
}
