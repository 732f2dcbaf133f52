package server

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/wallet"
)

// movementMetrics counts the money the balances move, in minor units
// (wallet.moved_minor, on /metrics wallet_moved_minor_total), by kind (top_up,
// debit, refund), currency and environment: minor units of different
// currencies are never added up, so currency is always a label.
func movementMetrics(tel *telemetry.Telemetry) func(context.Context, wallet.Entry) {
	moved, err := tel.MeterProvider.Meter("github.com/esimplatform/esim/services/wallet").Int64Counter(
		"wallet.moved_minor",
		metric.WithUnit("{minor_unit}"),
		metric.WithDescription("Money moved by the balances' ledger entries, in minor units of currency, by kind (top_up, debit, refund), currency and environment."))
	if err != nil {
		// Constant names and options cannot fail in a way to handle
		// here; were they to, otel hands back a no-op counter.
		otel.Handle(err)
	}
	return func(ctx context.Context, e wallet.Entry) {
		// A fresh context: the money moved even when the caller has hung up.
		moved.Add(context.WithoutCancel(ctx), e.AmountMinor, metric.WithAttributes(
			attribute.String("kind", string(e.Kind)),
			attribute.String("currency", string(e.Currency)),
			attribute.String("environment", string(e.Environment)),
		))
	}
}
