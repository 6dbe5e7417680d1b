package telemetry

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestPassedOn hands on where traces go and how many, never the headers,
// which may hold credentials.
func TestPassedOn(t *testing.T) {
	for _, v := range passedOn {
		t.Setenv(v, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer x")
	want := []Variable{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}, {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"}}
	if got := PassedOn(); !reflect.DeepEqual(got, want) {
		t.Errorf("PassedOn() = %v, want %v", got, want)
	}
}

// TestTraceparent: a traceparent read is the one written again, its trace
// ID is recorded, and text that is not one gives nothing.
func TestTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := FromTraceparent(context.Background(), tp)
	if got := Traceparent(ctx); got != tp {
		t.Errorf("Traceparent(FromTraceparent(%q)) = %q", tp, got)
	}
	if got := TraceID(tp); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("TraceID = %q", got)
	}
	h := http.Header{"Traceparent": {tp}}
	if sc := trace.SpanContextFromContext(FromHeader(context.Background(), h)); sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsRemote() {
		t.Errorf("FromHeader: %v", sc)
	}
	for _, bad := range []string{"", "00-0-0-01", "not a traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if got := TraceID(bad); got != "" {
			t.Errorf("TraceID(%q) = %q, want none", bad, got)
		}
		if got := Traceparent(FromTraceparent(context.Background(), bad)); got != "" {
			t.Errorf("Traceparent(FromTraceparent(%q)) = %q, want none", bad, got)
		}
	}
}

// TestSetupOffWithoutEndpoint: with no endpoint, Setup installs nothing
// that exports, and its stop does nothing.
func TestSetupOffWithoutEndpoint(t *testing.T) {
	for _, v := range passedOn {
		t.Setenv(v, "")
	}
	if Enabled() {
		t.Fatal("Enabled() with no endpoint")
	}
	stop, err := Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(context.Background()); err != nil {
		t.Error(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
	if _, err := Setup(context.Background(), "test"); err == nil {
		t.Error("Setup accepted an unknown protocol")
	}
}
