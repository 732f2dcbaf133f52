package ordering

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/esimplatform/esim/libs/input"
)

// Outbox keeps the events that Locked.Complete and Locked.MarkFailed
// write with an order's final status until they are published: a
// publisher that is down delays events and loses none.
type Outbox interface {
	// RelayEvents claims up to limit unpublished events, oldest first,
	// skipping those another relay has claimed, and hands them, each with
	// its order, to publish. When publish returns nil they are marked published;
	// otherwise they are left for the next try. The claim lasts until
	// then, so that relays running side by side (one per replica) never
	// publish one event twice. It returns how many events it published.
	RelayEvents(ctx context.Context, limit int, publish func(context.Context, []OutboxEvent) error) (int, error)
	// DeletePublishedBefore deletes the events published before t and
	// returns how many.
	DeletePublishedBefore(ctx context.Context, t time.Time) (int64, error)
	// UnpublishedEvents counts the events waiting.
	UnpublishedEvents(ctx context.Context) (int64, error)
}

// OutboxEvent is an event as the outbox keeps it.
type OutboxEvent struct {
	Event
	// TraceContext is the W3C trace context (traceparent, tracestate) of
	// the order's processing as it was when the event was written, empty
	// when it was not traced: its publication joins the order's trace.
	TraceContext map[string]string
	// Order is the event's order with its eSIMs as stored, read in the
	// claim's transaction: a relay that asked the pool for each order
	// waited behind the orders in flight, which hold a connection each,
	// and events lagged for seconds under load.
	Order Order
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

// EventBatch is the most events one PublishEvents call publishes.
const EventBatch = 100

// EventWritten receives a value after an order's event is committed, at
// most one waiting at a time: the relay's cue to publish at once rather
// than at its next poll.
func (s *Service) EventWritten() <-chan struct{} { return s.eventWritten }

// signalEventWritten never blocks: a wake-up already waiting covers this
// event too.
func (s *Service) signalEventWritten() {
	select {
	case s.eventWritten <- struct{}{}:
	default:
	}
}

// errNoRelay is a server assembled without an outbox or a publisher.
var errNoRelay = errors.New("no outbox or publisher is configured")

// PublishEvents publishes up to EventBatch waiting events, each with its
// order, and returns how many it published. An error leaves the batch
// waiting, to be published by the next call (of this replica or another).
func (s *Service) PublishEvents(ctx context.Context) (int, error) {
	if s.outbox == nil || s.publisher == nil {
		return 0, errNoRelay
	}
	n, err := s.outbox.RelayEvents(ctx, EventBatch, func(ctx context.Context, events []OutboxEvent) error {
		ps := make([]Publication, len(events))
		for i, e := range events {
			o := e.Order
			s.present(&o)
			ps[i] = Publication{Event: e, Order: o}
		}
		return s.publisher.Publish(ctx, ps)
	})
	if err != nil {
		return 0, fmt.Errorf("publish events: %w", err)
	}
	return n, nil
}

// DeletePublishedEvents deletes the events published longer than
// retention ago, and returns how many: the outbox is a queue, not a log.
func (s *Service) DeletePublishedEvents(ctx context.Context, retention time.Duration) (int64, error) {
	if s.outbox == nil {
		return 0, errNoRelay
	}
	n, err := s.outbox.DeletePublishedBefore(ctx, input.Now(s.now).Add(-retention))
	if err != nil {
		return 0, fmt.Errorf("delete published events: %w", err)
	}
	return n, nil
}

// UnpublishedEvents counts the events waiting to be published.
func (s *Service) UnpublishedEvents(ctx context.Context) (int64, error) {
	if s.outbox == nil {
		return 0, errNoRelay
	}
	return s.outbox.UnpublishedEvents(ctx)
}
