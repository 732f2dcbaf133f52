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
