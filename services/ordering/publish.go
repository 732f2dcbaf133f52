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

// Publication is an event with what it is about: an order's with the
// order as GetOrder answers it, a top-up's with the top-up, both final; an
// eSIM's with the eSIM as the event left it (and its top-ups as they are
// when published). Publishing it again later says the same.
type Publication struct {
	Event OutboxEvent
	Order Order
	TopUp *TopUp
	Esim  *Esim
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
	p, err := s.publication(ctx, e)
	if err != nil {
		return fmt.Errorf("publish event %s: %w", e.ID, err)
	}
	if err := s.publisher.Publish(ctx, []Publication{p}); err != nil {
		return fmt.Errorf("publish event %s: %w", e.ID, err)
	}
	return nil
}

// publication reads what e is about.
func (s *Service) publication(ctx context.Context, e OutboxEvent) (Publication, error) {
	if e.Esim != nil {
		snapshot := *e.Esim
		current, err := s.store.Esim(ctx, nil, snapshot.ID)
		if err != nil {
			return Publication{}, fmt.Errorf("read eSIM %s: %w", snapshot.ID, err)
		}
		snapshot.TopUps = current.TopUps
		s.presentEsim(&snapshot)
		return Publication{Event: e, Esim: &snapshot}, nil
	}
	o, err := s.store.Order(ctx, nil, e.OrderID)
	if err != nil {
		return Publication{}, fmt.Errorf("read order %s: %w", e.OrderID, err)
	}
	if o.Kind == KindTopUp {
		esim, err := s.store.Esim(ctx, nil, o.EsimID)
		if err != nil {
			return Publication{}, fmt.Errorf("read eSIM %s of top-up %s: %w", o.EsimID, o.ID, err)
		}
		t := TopUpOf(o, esim.OrderID)
		return Publication{Event: e, TopUp: &t}, nil
	}
	s.present(&o)
	return Publication{Event: e, Order: o}, nil
}
