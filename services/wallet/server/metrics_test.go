package server

import (
	"context"
	"testing"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	"github.com/esimplatform/esim/services/wallet"
)

// The money moved shows on /metrics as the alerts and the dashboard query
// it: wallet_moved_minor_total, summed per kind, currency and environment.
func TestMovementMetrics(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "wallet", telemetry.Config{LogLevel: "warn"}, &telemetrytest.LogBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	moved := movementMetrics(tel)
	for _, e := range []wallet.Entry{
		{Kind: wallet.Debit, AmountMinor: 300, Currency: wallet.USD, Environment: wallet.Live},
		{Kind: wallet.Debit, AmountMinor: 200, Currency: wallet.USD, Environment: wallet.Live},
		{Kind: wallet.Debit, AmountMinor: 700, Currency: wallet.EUR, Environment: wallet.Live},
	} {
		moved(ctx, e)
	}
	metrics := telemetrytest.Scrape(tel.MetricsHandler)
	for currency, want := range map[string]string{"USD": "500", "EUR": "700"} {
		if got := telemetrytest.Sample(metrics, "wallet_moved_minor_total", map[string]string{"kind": "debit", "currency": currency, "environment": "live"}); got != want {
			t.Errorf("wallet_moved_minor_total{kind=debit,currency=%s,environment=live} = %q, want %s", currency, got, want)
		}
	}
}
