package telemetry

import (
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// HTTPClient returns the client services use to call each other: it carries
// trace context and the request id to the callee and gives up after timeout.
func HTTPClient(timeout time.Duration) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	// Services call a handful of peers very often; keep enough idle
	// connections that a burst does not reconnect every time.
	base.MaxIdleConnsPerHost = 256
	return &http.Client{
		Timeout:   timeout,
		Transport: otelhttp.NewTransport(requestIDTransport{base}),
	}
}

type requestIDTransport struct{ next http.RoundTripper }

func (t requestIDTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if id := RequestID(r.Context()); id != "" && r.Header.Get(RequestIDHeader) == "" {
		r = r.Clone(r.Context())
		r.Header.Set(RequestIDHeader, id)
	}
	return t.next.RoundTrip(r)
}
