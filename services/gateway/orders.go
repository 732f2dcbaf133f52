package gateway

import (
	"context"
)

// OrderStatus is where an order is: completed, failed (and refunded), or
// pending while it is being issued. Orders themselves are the partner
// API's documents, which proto/partnerapi renders for the webhook service
// too (see httpapi.Orders).
type OrderStatus string

const (
	OrderPending   OrderStatus = "pending"
	OrderCompleted OrderStatus = "completed"
	OrderFailed    OrderStatus = "failed"
)

// Customer is the partner's own record of who an order is for.
type Customer struct {
	Name, Email, Reference string
}

// NewOrder is a partner's request to buy eSIMs. Quantity and Days are nil
// when the request left them out: ordering applies the defaults, which
// depend on the plan.
type NewOrder struct {
	PlanID         string
	Quantity       *int
	Days           *int
	Customer       Customer
	IdempotencyKey string
}

// OrderQuery selects a page of a partner's orders, newest first.
type OrderQuery struct {
	Status    OrderStatus // "" for any
	Reference string      // customer.reference; "" for any
	Page      int
	Limit     int
}

// EsimQuery selects a page of a partner's eSIMs, newest first.
type EsimQuery struct {
	OrderID string // "" for any
	ICCID   string // "" for any
	Page    int
	Limit   int
}

// Balance is the prepaid balance of one account in one environment.
type Balance struct {
	AmountMinor int64
	Currency    string
	Environment Environment
}

// Wallet reads balances.
type Wallet interface {
	Balance(ctx context.Context, p Principal) (Balance, error)
}
