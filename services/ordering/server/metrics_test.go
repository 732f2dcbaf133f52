package server

import (
	"context"
	"testing"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	"github.com/esimplatform/esim/services/ordering"
)

// Finished orders show on /metrics as the alerts and the dashboard query
// them: ordering_orders_finished_total by outcome, environment and kind.
func TestOrderMetrics(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "ordering", telemetry.Config{LogLevel: "warn"}, &telemetrytest.LogBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	finished := orderMetrics(tel)
	live := ordering.Scope{Environment: ordering.Live}
	for _, o := range []ordering.Order{
		{Status: ordering.StatusCompleted, Scope: live, Kind: ordering.KindEsims},
		{Status: ordering.StatusFailed, Scope: live, Kind: ordering.KindEsims},
		{Status: ordering.StatusFailed, Scope: live, Kind: ordering.KindEsims},
		{Status: ordering.StatusFailed, Scope: live, Kind: ordering.KindTopUp},
	} {
		finished(ctx, o)
	}
	metrics := telemetrytest.Scrape(tel.MetricsHandler)
	for _, c := range []struct{ outcome, kind, want string }{
		{"completed", "esims", "1"}, {"failed", "esims", "2"}, {"failed", "topup", "1"},
	} {
		labels := map[string]string{"outcome": c.outcome, "environment": "live", "kind": c.kind}
		if got := telemetrytest.Sample(metrics, "ordering_orders_finished_total", labels); got != c.want {
			t.Errorf("ordering_orders_finished_total%v = %q, want %s", labels, got, c.want)
		}
	}
}
