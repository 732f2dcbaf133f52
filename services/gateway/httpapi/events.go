package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/esimplatform/esim/services/gateway"
)

// Event is a webhook event of this environment and its delivery.
type Event struct {
	ID        string       `json:"id" doc:"evt_...: the webhook-id header and the payload's id, the same on every attempt. Dedupe on it."`
	Event     string       `json:"event" enum:"order.completed,order.failed,esim.installed,esim.activated,esim.usage,esim.expiring,esim.expired,topup.completed,topup.failed,ping"`
	CreatedAt time.Time    `json:"created_at"`
	OrderID   *string      `json:"order_id" format:"uuid" nullable:"true" doc:"The order the event is about: for eSIM and top-up events, the order that issued the eSIM; null for ping."`
	Status    string       `json:"status" enum:"pending,delivered,failed,no_endpoint" doc:"pending: an attempt is due or running; delivered: an attempt got a 2xx answer; failed: 3 attempts failed and it is never sent again; no_endpoint: no webhook URL was set for this environment when the event happened."`
	URL       *string      `json:"url" nullable:"true" doc:"Where the delivery goes; null with no_endpoint."`
	Attempts  []AttemptDoc `json:"attempts" doc:"Oldest first; at most 3."`
}

// AttemptDoc is one delivery attempt.
type AttemptDoc struct {
	Number      int       `json:"number" minimum:"1" maximum:"3"`
	AttemptedAt time.Time `json:"attempted_at"`
	DurationMS  int64     `json:"duration_ms" doc:"Until the answer, the failure or the 10 s time-out."`
	StatusCode  *int      `json:"status_code" nullable:"true" doc:"The HTTP status your endpoint answered; null when none came (refused, timed out, cut off)."`
	Error       *string   `json:"error" nullable:"true" doc:"Why the attempt failed; null when it succeeded."`
}

type listEventsInput struct {
	StrictQuery
	PageParams
	Event   string `query:"event" enum:"order.completed,order.failed,esim.installed,esim.activated,esim.usage,esim.expiring,esim.expired,topup.completed,topup.failed,ping" doc:"Only events of this kind."`
	OrderID string `query:"order_id" doc:"Only the events of this order, its eSIMs' and their top-ups' included."`
}

type listEventsOutput struct {
	Body ListEnvelope[Event]
}

func (a *handlers) registerEvents(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID: "list-events",
		Method:      http.MethodGet,
		Path:        "/events",
		Summary:     "List webhook events",
		Description: "Webhook events of this environment, newest first, each with its delivery status and every attempt: what to open when a delivery did not arrive.",
		Tags:        []string{"Events"},
		Security:    bearerAuth,
		Errors:      readErrors,
	}, a.listEvents)
}

func (a *handlers) listEvents(ctx context.Context, in *listEventsInput) (*listEventsOutput, error) {
	if _, ok := canonicalID(in.OrderID); in.OrderID != "" && !ok {
		return nil, fromDomain(ctx, &gateway.ValidationError{Fields: []gateway.FieldError{{Field: "order_id", Reason: "want an order id (a UUID)"}}})
	}
	page := in.orDefaults()
	events, total, err := a.Events.ListEvents(ctx, principalFrom(ctx), gateway.EventQuery{
		Type: in.Event, OrderID: strings.ToLower(in.OrderID), Page: page.Page, Limit: page.Limit,
	})
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	out := &listEventsOutput{Body: ListEnvelope[Event]{Data: make([]Event, len(events)), Pagination: in.pagination(total)}}
	for i, e := range events {
		out.Body.Data[i] = toEvent(e)
	}
	return out, nil
}

func toEvent(e gateway.Event) Event {
	out := Event{
		ID: e.ID, Event: e.Type, CreatedAt: e.CreatedAt.UTC(), OrderID: orNull(e.OrderID),
		Status: string(e.Status), URL: orNull(e.URL), Attempts: make([]AttemptDoc, len(e.Attempts)),
	}
	for i, at := range e.Attempts {
		doc := AttemptDoc{Number: at.Number, AttemptedAt: at.StartedAt.UTC(), DurationMS: at.Duration.Milliseconds(), Error: orNull(at.Error)}
		if at.StatusCode != 0 {
			doc.StatusCode = &at.StatusCode
		}
		out.Attempts[i] = doc
	}
	return out
}
