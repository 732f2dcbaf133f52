package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/telemetry"
)

// TestReadCallsReadsTheGatewaysBatchMetrics reads what the gateway's
// BatchObserver writes, through the real Prometheus exposition: calls,
// the requests they carried and their duration over every outcome, by
// backend.
func TestReadCallsReadsTheGatewaysBatchMetrics(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "gateway", telemetry.Config{LogLevel: "error"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	catalogue, redis := tel.BatchObserver("catalogue"), tel.BatchObserver("redis")
	catalogue(ctx, 10, 2*time.Millisecond, nil)
	catalogue(ctx, 20, 4*time.Millisecond, nil)
	catalogue(ctx, 6, 6*time.Millisecond, errors.New("catalogue down"))
	redis(ctx, 3, time.Millisecond, nil)
	srv := httptest.NewServer(http.StripPrefix("/metrics", tel.MetricsHandler))
	defer srv.Close()

	got, err := readCalls(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.catalogue; c.calls != 3 || c.callers != 36 || c.perCall() != 12 || c.meanCall() != 4*time.Millisecond {
		t.Errorf("catalogue: %+v, %.1f per call, mean %v; want 3 calls, 36 lookups, 12.0 per call, mean 4ms", c, c.perCall(), c.meanCall())
	}
	if r := got.redis; r.calls != 1 || r.callers != 3 || r.meanCall() != time.Millisecond {
		t.Errorf("redis: %+v, mean %v; want 1 call, 3 checks, mean 1ms", r, r.meanCall())
	}

	// What a phase saw is the difference of two readings.
	redis(ctx, 5, 3*time.Millisecond, nil)
	after, err := readCalls(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.minus(got); d.catalogue.calls != 0 || d.redis.calls != 1 || d.redis.callers != 5 || d.redis.meanCall() != 3*time.Millisecond {
		t.Errorf("difference %+v, want one Redis call of 5 checks taking 3ms and nothing else", d)
	}

	if _, err := readCalls(ctx, srv.URL+"/nowhere"); err == nil {
		t.Fatal("a 404 from /metrics was read as a count")
	}
}
