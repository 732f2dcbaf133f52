package telemetry

import (
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
)

// HTTPClient returns the client services use to call each other: it carries
// the request id (and, when tracing, the trace context) to the callee and
// gives up after timeout. The callee's server metrics count these calls, so
// the client records none of its own.
func (t *Telemetry) HTTPClient(timeout time.Duration) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	// Services call a handful of peers very often; keep enough idle
	// connections that a burst does not reconnect every time.
	base.MaxIdleConnsPerHost = 256
	var rt http.RoundTripper = requestIDTransport{base}
	if t.TracerProvider != nil {
		rt = otelhttp.NewTransport(rt,
			otelhttp.WithTracerProvider(t.TracerProvider),
			otelhttp.WithMeterProvider(noop.NewMeterProvider()),
			// Named after the method called, as the callee's span is, not
			// "HTTP POST" for every call. The peers are Twirp services, whose
			// paths are their methods: a handful of names, no ids in them.
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
	}
	return &http.Client{Timeout: timeout, Transport: rt}
}

type requestIDTransport struct{ next http.RoundTripper }

func (t requestIDTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if id := RequestID(r.Context()); id != "" && r.Header.Get(RequestIDHeader) == "" {
		r = r.Clone(r.Context())
		r.Header.Set(RequestIDHeader, id)
	}
	return t.next.RoundTrip(r)
}
