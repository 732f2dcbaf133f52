package server

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/ordering"
)

// orderMetrics counts the orders that reach their final status
// (ordering.orders.finished, on /metrics ordering_orders_finished_total) by
// outcome (completed or failed), environment and kind (esims or topup):
// the failure ratio an operator is paged on, and the rate of sales.
func orderMetrics(tel *telemetry.Telemetry) func(context.Context, ordering.Order) {
	finished, err := tel.MeterProvider.Meter("github.com/esimplatform/esim/services/ordering").Int64Counter(
		"ordering.orders.finished",
		metric.WithUnit("{order}"),
		metric.WithDescription("Orders and top-ups that reached their final status, by outcome (completed, failed), environment and kind."))
	if err != nil {
		// Constant names and options cannot fail in a way to handle
		// here; were they to, otel hands back a no-op counter.
		otel.Handle(err)
	}
	return func(ctx context.Context, o ordering.Order) {
		// A fresh context: the order is finished even when its caller
		// has hung up.
		finished.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(
			attribute.String("outcome", string(o.Status)),
			attribute.String("environment", string(o.Scope.Environment)),
			attribute.String("kind", string(o.Kind)),
		))
	}
}
