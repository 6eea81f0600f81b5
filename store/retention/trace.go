package retention

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the spans' instrumentation scope.
const tracerName = "github.com/metadatad/metadatad/store/retention"

// startSpan starts a span of a purge's work, a child of ctx's; the store
// calls made with the returned context become its children. end records
// how it went.
func (e *Engine) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (_ context.Context, end func(error)) {
	ctx, span := e.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
