package gateway

import (
	"context"
	"time"
)

// DeliveryStatus is where an event's webhook delivery is.
type DeliveryStatus string

const (
	DeliveryPending    DeliveryStatus = "pending"
	DeliveryDelivered  DeliveryStatus = "delivered"
	DeliveryFailed     DeliveryStatus = "failed"
	DeliveryNoEndpoint DeliveryStatus = "no_endpoint"
)

// Event is a webhook event of the partner's environment with its
// delivery.
type Event struct {
	ID        string
	Type      string
	OrderID   string // "" for ping
	CreatedAt time.Time
	Status    DeliveryStatus
	URL       string
	Attempts  []Attempt
}

// Attempt is one try to deliver an event.
type Attempt struct {
	Number     int
	StartedAt  time.Time
	Duration   time.Duration
	StatusCode int // 0 when no answer came
	Error      string
}

// EventQuery selects a page of a partner's events, newest first.
type EventQuery struct {
	Type    string // "" for any
	OrderID string // "" for any
	Page    int
	Limit   int
}

// Events reads the webhook events of the principal's account and
// environment.
type Events interface {
	ListEvents(ctx context.Context, p Principal, q EventQuery) (events []Event, total int, err error)
}
