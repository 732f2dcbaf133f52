package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/esimplatform/esim/libs/telemetry"
)

func TestLogsCarryRequestAndTraceIDs(t *testing.T) {
	var out bytes.Buffer
	tel, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: "info"},
		&out, telemetry.WithSpanExporter(tracetest.NewInMemoryExporter()))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())

	ctx, span := tel.TracerProvider.Tracer("test").Start(telemetry.WithRequestID(context.Background(), "req_1"), "op")
	tel.Logger.InfoContext(ctx, "hello", "k", "v")
	span.End()

	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("log is not JSON: %q", out.String())
	}
	if line["service"] != "svc" || line["request_id"] != "req_1" || line["msg"] != "hello" {
		t.Fatalf("log line %v", line)
	}
	if id, _ := line["trace_id"].(string); id != span.SpanContext().TraceID().String() {
		t.Fatalf("trace_id %v, want the span's %s", line["trace_id"], span.SpanContext().TraceID())
	}
}

// Without an exporter nothing is traced, not even by libraries that use
// the global provider; logs still carry the request id.
func TestNoExporterMeansNoTracing(t *testing.T) {
	var out bytes.Buffer
	tel, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: "info"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.TracerProvider != nil {
		t.Fatalf("tracer provider %T without an exporter", tel.TracerProvider)
	}
	ctx, span := otel.Tracer("test").Start(telemetry.WithRequestID(context.Background(), "req_2"), "op")
	defer span.End()
	if span.IsRecording() {
		t.Fatal("the global tracer records spans nobody exports")
	}
	tel.Logger.InfoContext(ctx, "hello")
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("log is not JSON: %q", out.String())
	}
	if line["request_id"] != "req_2" || line["trace_id"] != nil {
		t.Fatalf("log line %v: want the request id and no trace id", line)
	}
}

func TestRejectsUnknownLogLevel(t *testing.T) {
	if _, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: "loud"}, io.Discard); err == nil {
		t.Fatal("want an error for LOG_LEVEL=loud")
	}
}

func TestMetricsHandlerServesPrometheus(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	rec := httptest.NewRecorder()
	tel.MetricsHandler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "go_goroutines") {
		t.Fatalf("metrics: %d %.200s", rec.Code, rec.Body.String())
	}
}
