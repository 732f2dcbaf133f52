package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// BatchObserver returns a coalesce.Observer that records each call a
// service sends to backend on behalf of coalesced callers:
// backend.call.duration (by backend and outcome, ok or error) and
// backend.call.batch_size (the callers one call served, by backend).
//
// A call's own callee may have server metrics of its own, but only the
// caller's side shows the batches, and a backend such as Redis has none
// that name the service. One observation per call, not per caller: at the
// gateway's maximum a call serves dozens of requests.
func (t *Telemetry) BatchObserver(backend string) func(ctx context.Context, size int, took time.Duration, err error) {
	meter := t.MeterProvider.Meter("github.com/esimplatform/esim/libs/telemetry")
	// The names and options are constants, so creating the instruments
	// cannot fail in a way a caller could handle; were it to, otel hands
	// back no-op instruments and its error handler logs why. Asked for
	// twice, the SDK hands back the same instrument.
	duration, err := meter.Float64Histogram("backend.call.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of calls to a backend, each serving one or more coalesced callers."),
		// The server's buckets (libs/httpserver): a backend call is part of
		// a request that should take under 10 ms.
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		otel.Handle(err)
	}
	size, err := meter.Int64Histogram("backend.call.batch_size",
		metric.WithUnit("{caller}"),
		metric.WithDescription("Callers served by one call to a backend."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256))
	if err != nil {
		otel.Handle(err)
	}
	// Label sets built once: building them per call is what made otelhttp's
	// metrics a measurable share of a request (libs/httpserver).
	succeeded := metric.WithAttributeSet(attribute.NewSet(attribute.String("backend", backend), attribute.String("outcome", "ok")))
	failed := metric.WithAttributeSet(attribute.NewSet(attribute.String("backend", backend), attribute.String("outcome", "error")))
	ofBackend := metric.WithAttributeSet(attribute.NewSet(attribute.String("backend", backend)))
	return func(ctx context.Context, n int, took time.Duration, err error) {
		outcome := succeeded
		if err != nil {
			outcome = failed
		}
		duration.Record(ctx, took.Seconds(), outcome)
		size.Record(ctx, int64(n), ofBackend)
	}
}
