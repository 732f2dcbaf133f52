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
// status.
const (
	EventOrderCompleted EventType = "order.completed"
	EventOrderFailed    EventType = "order.failed"
)

// Event is the fact that an order reached its final status. It is written
// in the transaction that moves the status, so the platform hears of every
// finished order and of no other, and published afterwards, at least once
// and always under the same ID: consumers dedupe on it.
type Event struct {
	// ID is evt_ and the 32 hex digits of a UUID v7.
	ID      string
	Type    EventType
	OrderID uuid.UUID
	// CreatedAt is when the order reached its final status.
	CreatedAt time.Time
}

// newEvent is the event of an order reaching its final status now.
func (s *Service) newEvent(t EventType, orderID uuid.UUID) (Event, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Event{}, fmt.Errorf("new event id: %w", err)
	}
	return Event{ID: "evt_" + hex.EncodeToString(id[:]), Type: t, OrderID: orderID, CreatedAt: input.Now(s.now)}, nil
}
