// Package telemetry sets up OpenTelemetry tracing for the kubeskills
// programs and carries a trace across the places a chat's life crosses:
// HTTP requests, a CommandRun's annotation, a sandbox's command line.
//
// Tracing is off unless an OTLP endpoint is configured with the standard
// variables (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// "http/protobuf" (the default) or "grpc". Sampling follows
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, the service's name
// OTEL_SERVICE_NAME, and OTEL_SDK_DISABLED=true turns tracing off.
// Whether tracing is on or off, a trace context that comes in is passed
// on: a span that is not recorded still carries its parent's trace.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// Setup installs the W3C trace-context propagator and, when an OTLP
// endpoint is configured, a tracer provider that exports to it in
// batches, named service unless OTEL_SERVICE_NAME says otherwise. The
// returned function flushes and stops it; it does nothing when tracing is
// off.
func Setup(ctx context.Context, service string) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	switch p := protocol(); p {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTLP protocol %q is not supported: use http/protobuf or grpc", p)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to make the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("failed to describe the service for its traces: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Enabled tells whether the environment configures a trace exporter.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// protocol is the OTLP protocol the environment asks for.
func protocol() string {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			return p
		}
	}
	return "http/protobuf"
}

// passedOn are the variables that configure where traces go and how many,
// which a process hands to the ones it starts (the operator to its
// agents). OTEL_EXPORTER_OTLP_HEADERS and its traces twin are not among
// them: they may hold credentials.
var passedOn = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
}

// Variable is one environment variable.
type Variable struct{ Name, Value string }

// PassedOn returns the tracing variables of this process's environment
// that are set, in a fixed order, for the processes it starts.
func PassedOn() []Variable {
	var out []Variable
	for _, name := range passedOn {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			out = append(out, Variable{Name: name, Value: v})
		}
	}
	return out
}
