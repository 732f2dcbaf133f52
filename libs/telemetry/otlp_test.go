package telemetry_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/esimplatform/esim/libs/telemetry"
)

// A misspelt endpoint is a configuration error, refused at start like a
// bad LOG_LEVEL: taken as it is, "collector:4318" posts to "http:///",
// "ftp://..." silently becomes http and an unparsable URL falls back to
// https://localhost:4318, and the service runs on exporting nothing.
func TestSetupRejectsMalformedOTLPEndpoint(t *testing.T) {
	for _, endpoint := range []string{
		"otel-collector:4318",
		"localhost:4318",
		"http://",
		"ftp://collector:4318",
		"http://[::1",
		"http://collector:4318?x=1",
		"http://collector:4318#frag",
		"http://user:s3cr3t@[::1",
		"user:s3cr3t@collector:4318",
		"grpc://user:s3cr3t@collector:4317",
	} {
		if tel, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: "info", OTLPEndpoint: endpoint}, io.Discard); err == nil {
			tel.Shutdown(context.Background())
			t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT=%q accepted", endpoint)
		} else if !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT=%q: error %q, want it to name the variable and not the password", endpoint, err)
		}
	}
	for _, endpoint := range []string{"http://otel-collector:4318", "https://collector.example:4318/", "http://127.0.0.1:4318/otlp"} {
		tel, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: "info", OTLPEndpoint: endpoint}, io.Discard)
		if err != nil {
			t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT=%q: %v", endpoint, err)
			continue
		}
		tel.Shutdown(context.Background())
	}
}

// Spans and metrics name the service and its version, plus what the
// platform adds through the standard OTEL_RESOURCE_ATTRIBUTES (namespace,
// environment, pod), which a collector needs to tell replicas apart.
func TestResourceNamesServiceVersionAndHonoursOTELResourceAttributes(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging,k8s.pod.name=gateway-7d9f")
	spans := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Setup(context.Background(), "gateway", telemetry.Config{LogLevel: "info"}, io.Discard, telemetry.WithSpanExporter(spans))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	_, span := tel.TracerProvider.Tracer("test").Start(context.Background(), "op")
	span.End()
	got := spans.GetSpans()
	if len(got) != 1 {
		t.Fatalf("%d spans", len(got))
	}
	attrs := map[attribute.Key]string{}
	for _, kv := range got[0].Resource.Attributes() {
		attrs[kv.Key] = kv.Value.String()
	}
	for key, want := range map[attribute.Key]string{
		"service.name":                "gateway",
		"deployment.environment.name": "staging",
		"k8s.pod.name":                "gateway-7d9f",
		"telemetry.sdk.language":      "go",
	} {
		if attrs[key] != want {
			t.Errorf("resource %s = %q, want %q (resource %v)", key, attrs[key], want, attrs)
		}
	}
	if attrs["service.version"] == "" {
		t.Errorf("resource has no service.version: %v", attrs)
	}
}
