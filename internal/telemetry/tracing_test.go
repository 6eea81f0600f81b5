package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestDefaultSampler: with no OTEL_TRACES_SAMPLER a root call is traced at
// DefaultTraceRatio and a sampled caller's trace always continues; a
// sampler the environment names is left to the SDK.
func TestDefaultSampler(t *testing.T) {
	s := defaultSampler(func(string) string { return "" })
	if s == nil {
		t.Fatal("no sampler when the environment names none")
	}
	sampled := 0
	const roots = 20_000
	rng := rand.New(rand.NewPCG(1, 2)) // trace ids are random
	for range roots {
		var id trace.TraceID
		binary.BigEndian.PutUint64(id[:8], rng.Uint64())
		binary.BigEndian.PutUint64(id[8:], rng.Uint64())
		r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id, Name: "call"})
		if r.Decision == sdktrace.RecordAndSample {
			sampled++
		}
	}
	if got := float64(sampled) / roots; got < DefaultTraceRatio/2 || got > DefaultTraceRatio*2 {
		t.Errorf("%.4f of root calls sampled, want about %.2f", got, DefaultTraceRatio)
	}
	parent := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true}))
	if r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: parent, TraceID: trace.TraceID{1}, Name: "call"}); r.Decision != sdktrace.RecordAndSample {
		t.Errorf("a sampled caller's trace was not continued: %v", r.Decision)
	}
	if s := defaultSampler(func(name string) string {
		if name == "OTEL_TRACES_SAMPLER" {
			return "always_on"
		}
		return ""
	}); s != nil {
		t.Errorf("a sampler set in the environment was overridden by %s", s.Description())
	}
}
