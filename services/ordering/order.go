package ordering

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// GetOrder returns the order with its eSIMs; ErrNotFound outside scope.
// A nil scope (operators) reads any order.
func (s *Service) GetOrder(ctx context.Context, scope *Scope, id uuid.UUID) (Order, error) {
	if err := validScope(scope); err != nil {
		return Order{}, err
	}
	o, err := s.store.Order(ctx, scope, id)
	if err == nil && o.Kind == KindTopUp {
		err = ErrNotFound // a top-up is shown with its eSIM
	}
	if err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", id, err)
	}
	s.present(&o)
	return o, nil
}

// OrderLookup is an order asked for by its id in its scope.
type OrderLookup struct {
	Scope Scope
	ID    uuid.UUID
}

// MaxOrderLookups bounds the lookups of one GetOrders call: one store read
// of that many orders stays as short as a page of ListOrders.
const MaxOrderLookups = MaxPageLimit

// GetOrders answers each lookup as GetOrder would, from one read of the
// store: the order, or nil where GetOrder answers not found. Concurrent
// reads share it, so each lookup carries its own scope and only ever
// finds an order of that scope.
func (s *Service) GetOrders(ctx context.Context, lookups []OrderLookup) ([]*Order, error) {
	if len(lookups) == 0 || len(lookups) > MaxOrderLookups {
		return nil, invalid("lookups", fmt.Sprintf("want 1 to %d", MaxOrderLookups))
	}
	for i := range lookups {
		if err := validScope(&lookups[i].Scope); err != nil {
			return nil, err
		}
	}
	found, err := s.store.Orders(ctx, lookups)
	if err != nil {
		return nil, fmt.Errorf("get %d orders: %w", len(lookups), err)
	}
	byLookup := make(map[OrderLookup]*Order, len(found))
	for i := range found {
		o := &found[i]
		if o.Kind == KindTopUp {
			continue // a top-up is shown with its eSIM
		}
		s.present(o)
		byLookup[OrderLookup{Scope: o.Scope, ID: o.ID}] = o
	}
	out := make([]*Order, len(lookups))
	for i, l := range lookups {
		out[i] = byLookup[l]
	}
	return out, nil
}

// OrderFilter is what ListOrders selects.
type OrderFilter struct {
	// Scope nil lists every account's and environment's (operators).
	Scope *Scope
	// Status "" is any; StatusPending includes orders being refunded.
	Status Status
	// Reference "" is any; otherwise customer.reference exactly.
	Reference string
	// Page is 1..MaxPage and Limit 1..MaxPageLimit; 0 means 1 and
	// DefaultPageLimit.
	Page, Limit int32
}

// OrderPage is one page of orders and the total across all pages.
type OrderPage struct {
	Orders []Order
	Total  int64
}

// ListOrders returns orders newest first, each with its eSIMs.
func (s *Service) ListOrders(ctx context.Context, f OrderFilter) (OrderPage, error) {
	if err := validScope(f.Scope); err != nil {
		return OrderPage{}, err
	}
	switch f.Status {
	case "", StatusPending, StatusCompleted, StatusFailed:
	default:
		return OrderPage{}, invalid("status", "must be pending, completed or failed")
	}
	if err := validText("reference", f.Reference, MaxCustomerText); err != nil {
		return OrderPage{}, err
	}
	limit, offset, err := paging(f.Page, f.Limit)
	if err != nil {
		return OrderPage{}, err
	}
	orders, total, err := s.store.ListOrders(ctx, OrderQuery{Scope: f.Scope, Status: f.Status, Reference: f.Reference, Limit: limit, Offset: offset})
	if err != nil {
		return OrderPage{}, fmt.Errorf("list orders: %w", err)
	}
	for i := range orders {
		s.present(&orders[i])
	}
	return OrderPage{Orders: orders, Total: total}, nil
}
