package httpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// routeKey holds the request's route slot: the app names the route once it
// matched one, and the metrics (and span) read it when the request ends.
type routeKey struct{}

type routeSlot struct {
	method, route string
	// answer is the request's response writer, for the status it sent.
	answer *statusWriter
	// span is the server span's context, for the lines logged after it
	// ended; zero when tracing is off.
	span trace.SpanContext
}

// SetRoute names the route template that serves the request (e.g.
// "/v1/plans/{id}") for its metrics and, when tracing, its span ("GET
// /v1/plans/{id}", named when the request has been answered). Paths carry
// ids; routes keep both bounded.
func SetRoute(ctx context.Context, route string) {
	slot, ok := ctx.Value(routeKey{}).(*routeSlot)
	if !ok {
		return
	}
	slot.route = route
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(semconv.HTTPRoute(route))
	}
}

// namedRoute is the route the app set for req, else fallback's name for
// it, and whether the app named it.
func namedRoute(req *http.Request, fallback func(*http.Request) string) (string, bool) {
	if slot, ok := req.Context().Value(routeKey{}).(*routeSlot); ok && slot.route != "" {
		return slot.route, true
	}
	return fallback(req), false
}

// maxLabelSets bounds the label sets one server records, whatever the
// routes an app names.
const maxLabelSets = 256

// otherRoute labels requests beyond maxLabelSets.
const otherRoute = "other"

// unmatchedRoute labels a 404 whose route the app did not name and which
// never answered anything but 404: a path a caller made up. By default
// the route is the path (Twirp's paths are its methods), and without this
// every random path probed would be a series of its own, each taking room
// a real route needs later.
const unmatchedRoute = "unmatched"

// serverMetrics records http.server.request.duration by route, method and
// status. Its label sets are built once and reused: building them per
// request, as otelhttp does, costs a measurable share of a request's CPU.
type serverMetrics struct {
	duration metric.Float64Histogram
	mu       sync.RWMutex
	sets     map[labels]metric.RecordOption
	// served holds the unnamed routes (paths) that answered something
	// other than 404, which proves they exist: their 404s (Twirp's
	// not_found) keep the route. Bounded by sets, which it follows.
	served map[string]bool
}

type labels struct {
	method, route string
	status        int
}

func newServerMetrics(mp metric.MeterProvider) *serverMetrics {
	// The instrument's name and options are constants, so creating it
	// cannot fail in a way a caller could handle; were it to, otel hands
	// back a usable no-op instrument and its error handler logs why.
	duration, err := mp.Meter("github.com/esimplatform/esim/libs/httpserver").Float64Histogram(
		"http.server.request.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of HTTP server requests."),
		// From 0.5 ms, not the conventions' 5 ms: internal calls take well
		// under a millisecond and the public p99 target is 10 ms, so the
		// default buckets would put nearly every request in the first one.
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
	)
	if err != nil {
		otel.Handle(err)
	}
	return &serverMetrics{duration: duration, sets: map[labels]metric.RecordOption{}, served: map[string]bool{}}
}

// record records a request; named says whether the app named l.route.
func (m *serverMetrics) record(ctx context.Context, l labels, named bool, took time.Duration) {
	m.mu.RLock()
	opt, ok := m.sets[l]
	if !ok && m.madeUp(l.route, named, l.status) {
		l.route = unmatchedRoute
		opt, ok = m.sets[l]
	}
	m.mu.RUnlock()
	if !ok {
		opt = m.add(l, named)
	}
	m.duration.Record(ctx, took.Seconds(), opt)
}

// madeUp reports a route to be labelled unmatched: one the app did not
// name, answered 404, and never served anything else. Call with m.mu held.
func (m *serverMetrics) madeUp(route string, named bool, status int) bool {
	return !named && status == http.StatusNotFound && !m.served[route]
}

// spanName names a request's server span as its metrics label it, so a
// caller probing made-up methods and paths cannot grow the set of span
// names a trace backend indexes either.
func (m *serverMetrics) spanName(req *http.Request, fallback func(*http.Request) string) string {
	route, named := namedRoute(req, fallback)
	// Named when the request starts and again when it ends, by which time
	// the handler has answered (200 if it wrote nothing).
	status := http.StatusOK
	if slot, ok := req.Context().Value(routeKey{}).(*routeSlot); ok && slot.answer != nil {
		status = slot.answer.statusCode()
	}
	m.mu.RLock()
	if m.madeUp(route, named, status) {
		route = unmatchedRoute
	}
	m.mu.RUnlock()
	return methodLabel(req.Method) + " " + route
}

func (m *serverMetrics) add(l labels, named bool) metric.RecordOption {
	m.mu.Lock()
	defer m.mu.Unlock()
	if opt, ok := m.sets[l]; ok {
		return opt
	}
	if len(m.sets) >= maxLabelSets {
		l.route = otherRoute
		if opt, ok := m.sets[l]; ok {
			return opt
		}
	} else if !named && l.status != http.StatusNotFound && l.route != unmatchedRoute {
		m.served[l.route] = true
	}
	opt := metric.WithAttributeSet(attribute.NewSet(
		semconv.HTTPRequestMethodKey.String(l.method),
		semconv.HTTPRoute(l.route),
		semconv.HTTPResponseStatusCode(l.status),
	))
	m.sets[l] = opt
	return opt
}

// measure wraps next so every request's duration is recorded under its
// route: the one the app set with SetRoute, else route(r).
//
// At debug level it also logs every request (method, route, status,
// duration; the logger adds request and trace ids): what an operator turns
// on to follow traffic, off by default because at info level a line per
// request would cost more than the request itself on the hot path.
//
// A panicking request is logged once, with its stack and the request's
// ids. If nothing was written yet and answer is set, answer writes the
// response (a 500 in the API's shape); otherwise it is counted as a 500
// and the connection aborted as net/http does, without net/http's own
// id-less line.
func (m *serverMetrics) measure(next http.Handler, route func(*http.Request) string, log *slog.Logger, answer http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		slot := &routeSlot{method: r.Method, answer: sw}
		r = r.WithContext(context.WithValue(r.Context(), routeKey{}, slot))
		// Lines logged after the server span ended still belong to it.
		logContext := func() context.Context {
			if slot.span.IsValid() {
				return trace.ContextWithSpanContext(r.Context(), slot.span)
			}
			return r.Context()
		}
		finish := func(status int) {
			name, named := namedRoute(r, route)
			l := labels{method: methodLabel(r.Method), route: name, status: status}
			took := time.Since(start)
			m.record(r.Context(), l, named, took)
			if ctx := logContext(); log.Enabled(ctx, slog.LevelDebug) {
				log.LogAttrs(ctx, slog.LevelDebug, "request", slog.String("method", l.method), slog.String("route", l.route),
					slog.Int("status", l.status), slog.Float64("duration_ms", float64(took.Microseconds())/1000))
			}
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v != http.ErrAbortHandler {
				log.LogAttrs(logContext(), slog.LevelError, "panic serving request", slog.String("panic", fmt.Sprint(v)),
					slog.String("method", r.Method), slog.String("stack", string(debug.Stack())))
				if sw.status == 0 && answer != nil {
					answer(sw, r)
					finish(sw.statusCode())
					return
				}
			}
			status := sw.status
			if status == 0 {
				status = http.StatusInternalServerError
			}
			finish(status)
			panic(http.ErrAbortHandler)
		}()
		next.ServeHTTP(sw, r)
		finish(sw.statusCode())
	})
}

// methodLabel keeps unknown methods from becoming label values.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
