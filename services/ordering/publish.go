package ordering

import (
	"context"
	"errors"
	"fmt"
)

// OutboxEvent is an event as it waits for its publication: written by
// Locked.Complete and Locked.MarkFailed with the order's final status,
// and published afterwards, at least once, however long the publisher is
// down.
type OutboxEvent struct {
	Event
	// TraceContext is the W3C trace context (traceparent, tracestate) of
	// the order's processing as it was when the event was written, empty
	// when it was not traced: its publication joins the order's trace.
	TraceContext map[string]string
}

// Publication is an event with its order as GetOrder answers it. Both are
// final: publishing it again later says the same.
type Publication struct {
	Event OutboxEvent
	Order Order
}

// Publisher hands events to the platform.
type Publisher interface {
	// Publish delivers every publication, or returns an error after
	// which any of them may have been delivered: they are all published
	// again, and consumers dedupe on the event's ID.
	Publish(ctx context.Context, ps []Publication) error
}

// errNoPublisher is a server assembled without a publisher.
var errNoPublisher = errors.New("no publisher is configured")

// PublishEvent publishes e with its order. An error leaves it to be
// published again; so may a success, when the caller cannot record it.
func (s *Service) PublishEvent(ctx context.Context, e OutboxEvent) error {
	if s.publisher == nil {
		return errNoPublisher
	}
	o, err := s.store.Order(ctx, nil, e.OrderID)
	if err != nil {
		return fmt.Errorf("publish event %s: read order %s: %w", e.ID, e.OrderID, err)
	}
	s.present(&o)
	if err := s.publisher.Publish(ctx, []Publication{{Event: e, Order: o}}); err != nil {
		return fmt.Errorf("publish event %s: %w", e.ID, err)
	}
	return nil
}
