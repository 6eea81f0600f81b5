package retentiontest

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/observed"
	"github.com/metadatad/metadatad/store/retention"
)

// testPurgePhasesAreSpans traces a purge: a job span, its plan, work and
// janitor as children, each the parent of the store calls it makes, and a
// span per task delivery.
func testPurgePhasesAreSpans(t *testing.T, ts *suite) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	opts := quickOptions()
	opts.TracerProvider = tp
	f := ts.open(t, opts)
	f.OpenEngine(t, observed.Backend(f.Base, observed.Options{Name: "embedded", Tracer: tp.Tracer("store")}))
	f.Seed(t, cameras)
	f.Run(t)
	j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if j.State != retention.Succeeded {
		t.Fatalf("state %s (%s)", j.State, j.Error)
	}
	f.Stop()

	spans := recorder.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	if len(byName["purge.job"]) != 1 {
		t.Fatalf("%d purge.job spans, want 1", len(byName["purge.job"]))
	}
	job := byName["purge.job"][0]
	for _, phase := range []string{"purge.plan", "purge.work", "purge.janitor"} {
		if len(byName[phase]) != 1 {
			t.Errorf("%d %s spans, want 1", len(byName[phase]), phase)
			continue
		}
		p := byName[phase][0]
		if p.Parent().SpanID() != job.SpanContext().SpanID() {
			t.Errorf("%s is not a child of the job span", phase)
		}
		children := 0
		for _, s := range spans {
			if s.Parent().SpanID() == p.SpanContext().SpanID() && strings.HasPrefix(s.Name(), "store.") {
				children++
			}
		}
		if children == 0 {
			t.Errorf("%s has no store call among its children", phase)
		}
	}
	// GroupSize 2 over 5 cameras: 3 tasks, each delivered at least once.
	if n := len(byName["purge.task"]); n < 3 {
		t.Errorf("%d purge.task spans, want at least 3", n)
	}
}

// testEmbeddedPurgeIsASpan traces a purge on the embedded store: a job
// span, its purge as a child, and the store's exclusive batches under it.
func testEmbeddedPurgeIsASpan(t *testing.T, ts *suite) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	opts := quickOptions()
	opts.TracerProvider = tp
	f := ts.open(t, opts)
	f.OpenEngine(t, observed.Backend(f.Base, observed.Options{Name: "embedded", Tracer: tp.Tracer("store")}))
	f.Seed(t, cameras)
	f.Run(t)
	if j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff}); j.State != retention.Succeeded {
		t.Fatalf("state %s (%s)", j.State, j.Error)
	}
	f.Stop()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range recorder.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	if len(byName["purge.job"]) != 1 || len(byName["purge.embedded"]) != 1 {
		t.Fatalf("%d purge.job and %d purge.embedded spans, want one each", len(byName["purge.job"]), len(byName["purge.embedded"]))
	}
	purge := byName["purge.embedded"][0]
	if purge.Parent().SpanID() != byName["purge.job"][0].SpanContext().SpanID() {
		t.Error("purge.embedded is not a child of the job span")
	}
	batches := 0
	for _, s := range byName["store.purge"] {
		if s.Parent().SpanID() == purge.SpanContext().SpanID() {
			batches++
		}
	}
	if batches == 0 {
		t.Error("no exclusive batch (store.Purge) under purge.embedded")
	}
}
