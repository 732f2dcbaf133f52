package telemetry_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

// TestBatchObserverRecordsEachCall: every call observed is one duration,
// labelled with its backend and outcome, and one batch size, in the
// Prometheus exposition a scrape reads.
func TestBatchObserverRecordsEachCall(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "svc", telemetry.Config{LogLevel: "info"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)

	catalogue, redis := tel.BatchObserver("catalogue"), tel.BatchObserver("redis")
	catalogue(ctx, 1, 2*time.Millisecond, nil)
	catalogue(ctx, 7, 3*time.Millisecond, nil)
	catalogue(ctx, 3, 40*time.Millisecond, errors.New("catalogue down"))
	redis(ctx, 5, time.Millisecond, nil)

	body := telemetrytest.Scrape(tel.MetricsHandler)
	for _, c := range []struct {
		series string
		labels map[string]string
		want   string
	}{
		{"backend_call_duration_seconds_count", map[string]string{"backend": "catalogue", "outcome": "ok"}, "2"},
		{"backend_call_duration_seconds_sum", map[string]string{"backend": "catalogue", "outcome": "ok"}, "0.005"},
		{"backend_call_duration_seconds_count", map[string]string{"backend": "catalogue", "outcome": "error"}, "1"},
		{"backend_call_duration_seconds_count", map[string]string{"backend": "redis", "outcome": "ok"}, "1"},
		{"backend_call_batch_size_count", map[string]string{"backend": "catalogue"}, "3"},
		{"backend_call_batch_size_sum", map[string]string{"backend": "catalogue"}, "11"},
		{"backend_call_batch_size_bucket", map[string]string{"backend": "catalogue", "le": "4"}, "2"},
		{"backend_call_batch_size_sum", map[string]string{"backend": "redis"}, "5"},
	} {
		if got := telemetrytest.Sample(body, c.series, c.labels); got != c.want {
			t.Errorf("%s%v = %q, want %q; the series:\n%s", c.series, c.labels, got, c.want, grepLines(body, "backend_call"))
		}
	}
}

func grepLines(body, substr string) string {
	var out []string
	for l := range strings.Lines(body) {
		if strings.Contains(l, substr) {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	return strings.Join(out, "\n")
}
