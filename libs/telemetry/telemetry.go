// Package telemetry wires structured logs, OpenTelemetry traces and metrics
// the same way in every service: JSON logs that carry the request and trace
// ids, W3C trace context across Twirp calls, Prometheus metrics always and
// OTLP export when an endpoint is configured.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/esimplatform/esim/libs/config"
)

// Config is the part of every service's configuration that telemetry reads.
type Config struct {
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"LOG_LEVEL, default=info"`
	// OTLPEndpoint, when set, exports traces and metrics over OTLP/HTTP
	// (for example http://otel-collector:4318).
	OTLPEndpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
}

// Validate reports every setting Setup would refuse, so a service refuses
// its whole configuration at once and deployment checks can run it.
func (c Config) Validate() error {
	_, levelErr := parseLevel(c.LogLevel)
	_, endpointErr := otlpEndpoint(c.OTLPEndpoint)
	return errors.Join(levelErr, endpointErr)
}

// Telemetry holds what a service needs to log, trace and expose metrics.
type Telemetry struct {
	Logger *slog.Logger
	// TracerProvider is nil when no exporter is configured: tracing is
	// then off altogether, and instrumentation (HTTP, pgx) is not even
	// installed, because building spans nobody receives cost a tenth of
	// the platform's CPU per request. Logs still join across services by
	// request id.
	TracerProvider trace.TracerProvider
	// MeterProvider feeds /metrics (and OTLP when configured).
	MeterProvider metric.MeterProvider
	// MetricsHandler serves the Prometheus exposition format at /metrics.
	MetricsHandler http.Handler

	shutdown []namedShutdown
	// stopExports cuts short the span exports still running when
	// Shutdown's export budget is spent.
	stopExports context.CancelCauseFunc
}

type namedShutdown struct {
	signal string // what it flushes: traces, metrics
	fn     func(context.Context) error
}

// Setup builds the logger and the trace and meter providers for one service
// and installs them as the OpenTelemetry globals too, for libraries that
// only look there.
func Setup(ctx context.Context, service string, cfg Config, logOut io.Writer, opts ...Option) (*Telemetry, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	logger := slog.New(&contextHandler{Handler: slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level})}).
		With("service", service)

	// Everything else that logs in the process goes through the same JSON
	// handler: the standard library's log package (net/http's server
	// errors, for one) and OpenTelemetry's own errors and internal logs,
	// which by default are plain-text lines on stderr. Like the providers
	// below these are process-wide; the last Setup wins.
	slog.SetDefault(logger)
	// What arrives through the log package is net/http's "http: panic
	// serving ..." with its stack, TLS handshake failures and the like:
	// errors, which must survive LOG_LEVEL=warn (SetDefault alone files
	// them at info).
	slog.SetLogLoggerLevel(slog.LevelError)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry error", "err", err)
	}))
	otel.SetLogger(logr.FromSlogHandler(logger.Handler()))

	endpoint, err := otlpEndpoint(cfg.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	res, err := serviceResource(ctx, service)
	if err != nil {
		return nil, err
	}
	exportCtx, stopExports := context.WithCancelCause(context.Background())
	t := &Telemetry{Logger: logger, stopExports: stopExports}

	if endpoint != "" || o.spanExporter != nil {
		tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		if o.spanExporter != nil {
			tpOpts = append(tpOpts, sdktrace.WithSyncer(o.spanExporter))
		}
		if endpoint != "" {
			exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
			if err != nil {
				return nil, fmt.Errorf("otlp trace exporter: %w", err)
			}
			tpOpts = append(tpOpts, sdktrace.WithBatcher(boundedSpanExporter{exp, exportCtx}))
		}
		tp := sdktrace.NewTracerProvider(tpOpts...)
		t.TracerProvider = tp
		t.shutdown = append(t.shutdown, namedShutdown{"traces", tp.Shutdown})
		otel.SetTracerProvider(tp)
	} else {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
	}

	// Each service gets its own registry so two services started in one
	// process (tests, benchmarks) never clash on metric registration.
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promExporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(promExporter)}
	if endpoint != "" {
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint+"/v1/metrics"))
		if err != nil {
			return nil, fmt.Errorf("otlp metric exporter: %w", err)
		}
		mpOpts = append(mpOpts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	mp := sdkmetric.NewMeterProvider(mpOpts...)
	t.MeterProvider = mp
	t.shutdown = append(t.shutdown, namedShutdown{"metrics", mp.Shutdown})
	t.MetricsHandler = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})

	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return t, nil
}

// otlpEndpoint checks the OTLP/HTTP base URL and returns it without a
// trailing slash, ready for the signal paths. The exporters take any
// string and fail only when exporting, quietly and for good: a scheme-less
// "collector:4318" posts to "http:///", an unparsable URL falls back to
// https://localhost:4318. A service would run on exporting nothing.
func otlpEndpoint(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	endpoint, err := config.ParseBaseURL(raw)
	if err != nil {
		return "", fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w; want the collector's OTLP/HTTP base URL, such as http://otel-collector:4318", err)
	}
	return endpoint, nil
}

// serviceResource describes the service on every span and metric. The SDK
// adds OTEL_RESOURCE_ATTRIBUTES (namespace, environment, pod) below it,
// so service.name stays the one the logs carry; service.version comes
// from the build unless the environment sets it.
func serviceResource(ctx context.Context, service string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName(service)}
	if _, set := resource.Environment().Set().Value(semconv.ServiceVersionKey); !set {
		attrs = append(attrs, semconv.ServiceVersion(buildVersion()))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	return res, nil
}

// buildVersion is the main module's version, else the VCS revision the
// binary was built from ("-dirty" with uncommitted changes), else "devel".
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev[:min(len(rev), 12)] + dirty
}

// Option adjusts Setup beyond what configuration can say.
type Option func(*options)

type options struct {
	spanExporter sdktrace.SpanExporter
}

// WithSpanExporter turns tracing on and records every span synchronously
// into exp; tests use it to see a request's spans across services.
func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return func(o *options) { o.spanExporter = exp }
}

// shutdownBudget bounds the final flush of exporters. Services drain
// requests for up to SHUTDOWN_TIMEOUT (20s) after a preStop sleep (5s) of a
// 30s termination grace period: the flush must fit in what is left, with
// room for closing the database pool and exiting.
const shutdownBudget = 3 * time.Second

// exportBudget is the part of shutdownBudget span exports may take; the
// rest lets the batch span processor report a failed export and stop.
const exportBudget = shutdownBudget - 500*time.Millisecond

var errExportBudget = errors.New("telemetry shutdown: export budget spent")

// Shutdown flushes exporters; call it last, after the servers stopped. It
// runs even when ctx is already cancelled (it usually is: the signal that
// stopped the service cancelled it), within a budget of its own. Flushing
// is best effort: a failure (a collector that is down or slow) is logged
// as a warning and does not fail the shutdown, hence no error to return.
func (t *Telemetry) Shutdown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownBudget)
	defer cancel()
	// The batch span processor exports its last spans with a context of
	// its own (30s), which would outlive the budget: cut those exports.
	exportCtx, cancelExport := context.WithTimeoutCause(ctx, exportBudget, errExportBudget)
	defer cancelExport()
	stop := context.AfterFunc(exportCtx, func() { t.stopExports(context.Cause(exportCtx)) })
	defer stop()

	// Traces and metrics flush side by side, each within the whole budget.
	var wg sync.WaitGroup
	for _, s := range t.shutdown {
		wg.Go(func() {
			if err := s.fn(ctx); err != nil {
				t.Logger.Warn("telemetry flush failed", "signal", s.signal, "err", err)
			}
		})
	}
	wg.Wait()
}

// boundedSpanExporter gives up an export once stop is done.
type boundedSpanExporter struct {
	sdktrace.SpanExporter
	stop context.Context
}

func (e boundedSpanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.stop, func() { cancel(context.Cause(e.stop)) })()
	return e.SpanExporter.ExportSpans(ctx, spans)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("LOG_LEVEL %q: want debug, info, warn or error", s)
	}
	return l, nil
}

type requestIDKey struct{}

// WithRequestID returns a context carrying the request id, which every log
// line and every outgoing service call made with it then carries too.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id of ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// RequestIDHeader is the header that carries the request id on public
// responses and between services.
const RequestIDHeader = "Request-Id"

// contextHandler adds the request and trace ids found in the context to
// every record, so logs of one request can be joined across services.
type contextHandler struct{ slog.Handler }

func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{h.Handler.WithGroup(name)}
}

// LogExit writes why a service is stopping, for main once run has failed,
// whether or not Setup ran: one line in the JSON shape of every other, so
// a log pipeline that parses the service's output keeps the line that
// matters most.
func LogExit(w io.Writer, service string, err error) {
	slog.New(slog.NewJSONHandler(w, nil)).Error("exiting", "service", service, "err", err.Error())
}

// AtLeast is log without its records below level: for a library that
// logs every routine step at info (River), whose warnings still matter.
func AtLeast(log *slog.Logger, level slog.Level) *slog.Logger {
	return slog.New(atLeast{log.Handler(), level})
}

type atLeast struct {
	slog.Handler
	level slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(attrs), h.level}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.level}
}
