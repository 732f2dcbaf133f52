package ordering

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

// EventType names what an event says happened to an order.
type EventType string

// An order has exactly one event, written when it reaches its final
// status; so has a top-up (topup.*). An eSIM has one per move after its
// order (esim.*, lifecycle.go).
const (
	EventOrderCompleted EventType = "order.completed"
	EventOrderFailed    EventType = "order.failed"
)

// Event is the fact that an order or top-up reached its final status, or
// that an eSIM moved. It is written in the transaction that makes the
// change, so the platform hears of every change and of no other, and
// published afterwards, at least once and always under the same ID:
// consumers dedupe on it.
type Event struct {
	// ID is evt_ and the 32 hex digits of a UUID v7.
	ID   string
	Type EventType
	// OrderID is the order's or top-up's; on esim.* the eSIM's order.
	OrderID uuid.UUID
	// CreatedAt is when it happened.
	CreatedAt time.Time
	// Esim is, on esim.*, the eSIM as the change left it: published as it
	// was then, however it moved since.
	Esim *Esim
	// Threshold is esim.usage's percentage.
	Threshold int32
}

// esimEvents are the events of an eSIM's change, each carrying the eSIM
// as the change left it.
func (s *Service) esimEvents(e Esim, c EsimChange) ([]Event, error) {
	out := make([]Event, len(c.Events))
	snapshot := e
	snapshot.TopUps = nil
	for i, ce := range c.Events {
		ev, err := s.newEvent(ce.Type, e.OrderID)
		if err != nil {
			return nil, err
		}
		ev.Esim, ev.Threshold = &snapshot, ce.Threshold
		out[i] = ev
	}
	return out, nil
}

// newEvent is the event of an order reaching its final status now.
func (s *Service) newEvent(t EventType, orderID uuid.UUID) (Event, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Event{}, fmt.Errorf("new event id: %w", err)
	}
	return Event{ID: "evt_" + hex.EncodeToString(id[:]), Type: t, OrderID: orderID, CreatedAt: input.Now(s.now)}, nil
}
