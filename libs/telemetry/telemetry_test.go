package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
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

// jsonLines decodes a log, failing the test for every line that is not a
// JSON object: a plain-text line is what these tests exist to catch.
func jsonLines(t *testing.T, output string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.Lines(output) {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Errorf("log line is not JSON: %q", l)
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

// setupWithSomethingToExport sets telemetry up against an OTLP endpoint,
// with one span and one metric point waiting, so that Shutdown has both
// kinds to flush. Whatever goes through the standard library's log package
// lands in the returned output too, so a plain-text line there would show.
func setupWithSomethingToExport(t *testing.T, endpoint string) (*telemetry.Telemetry, *telemetrytest.LogBuffer) {
	t.Helper()
	out := &telemetrytest.LogBuffer{}
	prevSlog, prevW, prevFlags := slog.Default(), log.Writer(), log.Flags()
	log.SetOutput(out)
	t.Cleanup(func() {
		slog.SetDefault(prevSlog)
		log.SetOutput(prevW)
		log.SetFlags(prevFlags)
	})
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "svc", telemetry.Config{LogLevel: "info", OTLPEndpoint: endpoint}, out)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider.Tracer("test").Start(ctx, "op")
	span.End()
	counter, err := tel.MeterProvider.Meter("test").Int64Counter("test.calls")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, 1)
	return tel, out
}

// A collector that is down must not fail a service's shutdown, nor hold it
// past its budget: the flush failure is a JSON warning like every other
// log line, and OpenTelemetry's own errors are no plain-text lines either.
func TestShutdownWithCollectorDownWarnsInJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close() // connections are now refused

	ctx := context.Background()
	tel, out := setupWithSomethingToExport(t, endpoint)
	// Both the standard logger and OpenTelemetry's error handler now write
	// JSON.
	log.Print("stdlib line")
	otel.Handle(errors.New("handled error"))

	cancelled, cancel := context.WithCancel(ctx)
	cancel() // as in the services: the signal cancelled their context
	start := time.Now()
	tel.Shutdown(cancelled)
	elapsed := time.Since(start)
	// Services drain for 20s after a 5s preStop sleep of a 30s grace period.
	if elapsed > 4*time.Second {
		t.Errorf("Shutdown took %v", elapsed)
	}

	var warnedTraces, warnedMetrics bool
	for _, line := range jsonLines(t, out.String()) {
		text := fmt.Sprint(line)
		if line["level"] == "WARN" && strings.Contains(text, "connection refused") {
			warnedTraces = warnedTraces || strings.Contains(text, "/v1/traces")
			warnedMetrics = warnedMetrics || strings.Contains(text, "/v1/metrics")
		}
	}
	if !warnedTraces || !warnedMetrics {
		t.Errorf("want warnings for the failed trace and metric exports (traces %v, metrics %v); log:\n%s",
			warnedTraces, warnedMetrics, out.String())
	}
	for _, want := range []string{`"msg":"stdlib line"`, `"err":"handled error"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, out.String())
		}
	}
}

// A collector that accepts connections but never answers holds the flush
// only for Shutdown's budget.
func TestShutdownWithCollectorHangingIsBounded(t *testing.T) {
	release := make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(collector.Close)
	t.Cleanup(func() { close(release) })

	ctx := context.Background()
	tel, out := setupWithSomethingToExport(t, collector.URL)

	start := time.Now()
	tel.Shutdown(ctx)
	if elapsed := time.Since(start); elapsed > 4*time.Second {
		t.Errorf("Shutdown took %v", elapsed)
	}
	// The metric flush fails in Shutdown; the span batcher reports its cut
	// export through OpenTelemetry's error handler instead.
	var warnedTraces, warnedMetrics bool
	for _, line := range jsonLines(t, out.String()) {
		errText, _ := line["err"].(string)
		if line["level"] != "WARN" {
			continue
		}
		warnedMetrics = warnedMetrics || line["msg"] == "telemetry flush failed" && line["signal"] == "metrics"
		warnedTraces = warnedTraces || line["msg"] == "telemetry flush failed" && line["signal"] == "traces" ||
			line["msg"] == "opentelemetry error" && strings.Contains(errText, "traces export")
	}
	if !warnedTraces || !warnedMetrics {
		t.Errorf("want a warning for each cut flush (traces %v, metrics %v); log:\n%s", warnedTraces, warnedMetrics, out.String())
	}
}

// The log package carries net/http's errors (a handler's panic, with its
// stack): they stay errors, and so survive a quiet LOG_LEVEL.
func TestStandardLogLinesAreErrorsInJSON(t *testing.T) {
	prevSlog, prevW, prevFlags := slog.Default(), log.Writer(), log.Flags()
	t.Cleanup(func() {
		slog.SetDefault(prevSlog)
		slog.SetLogLoggerLevel(slog.LevelInfo)
		log.SetOutput(prevW)
		log.SetFlags(prevFlags)
	})
	out := &telemetrytest.LogBuffer{}
	if _, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: "warn"}, out); err != nil {
		t.Fatal(err)
	}
	log.Print("http: panic serving 127.0.0.1:1: boom")
	var line map[string]any
	if err := json.Unmarshal([]byte(out.String()), &line); err != nil || line["level"] != "ERROR" || line["msg"] != "http: panic serving 127.0.0.1:1: boom" {
		t.Fatalf("log line %q (%v), want the message as one JSON line at ERROR", out.String(), err)
	}
}

func TestLogExitIsOneJSONLine(t *testing.T) {
	var buf strings.Builder
	telemetry.LogExit(&buf, "gateway", errors.New(`config: REDIS_URL: "x" is not a URL`))
	var line map[string]any
	if err := json.Unmarshal([]byte(buf.String()), &line); err != nil || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("not one JSON line: %q (%v)", buf.String(), err)
	}
	if line["level"] != "ERROR" || line["service"] != "gateway" || line["err"] != `config: REDIS_URL: "x" is not a URL` {
		t.Fatalf("line %v", line)
	}
}
