package telemetry

import (
	"context"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// TracingEnabled reports whether the standard OpenTelemetry variables ask
// for traces: an OTLP endpoint is set and the SDK is not disabled.
func TracingEnabled() bool {
	if os.Getenv("OTEL_SDK_DISABLED") == "true" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// StartTracing exports spans over OTLP/gRPC as the standard variables say
// (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _CERTIFICATE, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, ...), and installs W3C
// trace context propagation so a caller's trace continues here. The
// returned shutdown flushes the spans still buffered.
func StartTracing(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	exporter, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Later options win: the environment (OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES) over the default service name.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("metadatad")),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	if err != nil {
		return nil, nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)}
	if s := defaultSampler(os.Getenv); s != nil {
		opts = append(opts, sdktrace.WithSampler(s))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp, tp.Shutdown, nil
}

// DefaultTraceRatio is the share of calls without a sampled parent that
// are traced when OTEL_TRACES_SAMPLER is unset. The SDK's own default
// traces every call: at a thousand creates a second that is a span and its
// store children each, and 25-55 us of a create's CPU. A caller's sampled
// trace is always continued.
const DefaultTraceRatio = 0.01

// defaultSampler is the sampler when the environment names none; nil when
// it does, and the SDK reads it.
func defaultSampler(getenv func(string) string) sdktrace.Sampler {
	if getenv("OTEL_TRACES_SAMPLER") != "" {
		return nil
	}
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(DefaultTraceRatio))
}
