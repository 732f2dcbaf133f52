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

// NewTopUp is a partner's request to buy more of the same for an eSIM.
// Days is nil when the request left it out.
type NewTopUp struct {
	EsimID         string
	PlanID         string
	Days           *int
	IdempotencyKey string
}

// EsimCoverage is what a plan must match to top up an eSIM: the type of
// the eSIM's plan and every country it covered.
type EsimCoverage struct {
	Type      PlanType
	Countries []string
}

// Simulation is a sandbox eSIM's move as a device or the network would
// make it: install, activate, consume (Bytes) or expire.
type Simulation struct {
	Action string
	Bytes  *int64
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
	Status  string // "" for any
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
