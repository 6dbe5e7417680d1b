package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext is the W3C trace-context format, used wherever a trace is
// written down: whatever the process's global propagator, a traceparent
// is a traceparent.
var traceContext = propagation.TraceContext{}

// Traceparent is the W3C traceparent of the span in ctx: "" when there is
// no valid one.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c.Get("traceparent")
}

// FromTraceparent returns ctx under the remote span that traceparent
// names: ctx itself when traceparent is not a valid one.
func FromTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// TraceID is the trace ID that traceparent names, in hexadecimal: "" when
// it is not a valid traceparent.
func TraceID(traceparent string) string {
	sc := trace.SpanContextFromContext(FromTraceparent(context.Background(), traceparent))
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// FromHeader returns ctx under the remote span that an HTTP request's
// traceparent header names, if it names a valid one: a caller's trace
// continues into ours.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}
