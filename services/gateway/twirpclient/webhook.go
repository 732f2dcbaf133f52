package twirpclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/gateway"
)

// Webhook reads events from the webhook service.
type Webhook struct{ client webhookv1.Webhook }

// NewWebhook returns a client of the webhook service at baseURL.
func NewWebhook(baseURL string, hc *http.Client) *Webhook {
	return &Webhook{client: webhookv1.NewWebhookProtobufClient(baseURL, hc)}
}

var deliveryStatuses = map[webhookv1.DeliveryStatus]gateway.DeliveryStatus{
	webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING:     gateway.DeliveryPending,
	webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED:   gateway.DeliveryDelivered,
	webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED:      gateway.DeliveryFailed,
	webhookv1.DeliveryStatus_DELIVERY_STATUS_NO_ENDPOINT: gateway.DeliveryNoEndpoint,
}

// ListEvents implements gateway.Events.
func (w *Webhook) ListEvents(ctx context.Context, p gateway.Principal, q gateway.EventQuery) ([]gateway.Event, int, error) {
	res, err := w.client.ListEvents(ctx, &webhookv1.ListEventsRequest{
		Scope: &webhookv1.Scope{AccountId: p.AccountID, Environment: environment(p.Environment)},
		Type:  q.Type, OrderId: q.OrderID, Page: int32(q.Page), Limit: int32(q.Limit),
	})
	if err != nil {
		return nil, 0, translate("webhook", err)
	}
	events := make([]gateway.Event, len(res.GetEvents()))
	for i, e := range res.GetEvents() {
		status, ok := deliveryStatuses[e.GetStatus()]
		if !ok {
			// A newer webhook service's status: refused rather than
			// shown as something this contract does not define.
			return nil, 0, fmt.Errorf("webhook: event %s has delivery status %v, which this gateway does not know", e.GetId(), e.GetStatus())
		}
		events[i] = gateway.Event{
			ID: e.GetId(), Type: e.GetType(), OrderID: e.GetOrderId(), CreatedAt: e.GetCreatedAt().AsTime(),
			Status: status, URL: e.GetUrl(), Attempts: make([]gateway.Attempt, len(e.GetAttempts())),
		}
		for j, a := range e.GetAttempts() {
			events[i].Attempts[j] = gateway.Attempt{
				Number: int(a.GetNumber()), StartedAt: a.GetStartedAt().AsTime(), Duration: time.Duration(a.GetDurationMs()) * time.Millisecond,
				StatusCode: int(a.GetStatusCode()), Error: a.GetError(),
			}
		}
	}
	return events, int(res.GetTotal()), nil
}
