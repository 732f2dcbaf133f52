package gateway

import (
	"context"
	"time"
)

// OrderStatus is where an order is: completed, failed (and refunded), or
// pending while it is being issued.
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

// Order is an order as a partner sees it.
type Order struct {
	ID          string
	Environment Environment
	PlanID      string
	Quantity    int
	// Days is set on per-day plans only.
	Days       *int
	Status     OrderStatus
	UnitMinor  int64
	TotalMinor int64
	Currency   string
	Customer   Customer
	// ErrorCode and ErrorMessage say why a failed order failed.
	ErrorCode    string
	ErrorMessage string
	CreatedAt    time.Time
	Esims        []Esim
}

// Esim is one issued profile with what a traveller needs to install it.
type Esim struct {
	ID             string
	OrderID        string
	PlanName       string
	ICCID          string
	QRCodeURL      string
	ActivationCode string
	SMDPAddress    string
	Status         string
	ValidityDays   int
	Unlimited      bool
	// TotalBytes is 0 when Unlimited.
	TotalBytes           int64
	UsedBytes            int64
	DataUpdatedAt        time.Time
	InstallInstructions  string
	IOSUniversalLink     string
	AndroidUniversalLink string
	CreatedAt            time.Time
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

// Orders places and reads orders. Every call but ActivationCode is scoped
// to the principal's account and environment: another's id is ErrNotFound.
type Orders interface {
	// CreateOrder answers the order and whether an earlier request with
	// the same idempotency key made it. A failed order is an answer, not
	// an error; ErrInsufficientFunds, ErrNotFound (the plan) and a
	// *ValidationError are the errors a partner can fix.
	CreateOrder(ctx context.Context, p Principal, in NewOrder) (order Order, replayed bool, err error)
	GetOrder(ctx context.Context, p Principal, id string) (Order, error)
	ListOrders(ctx context.Context, p Principal, q OrderQuery) (orders []Order, total int, err error)
	GetEsim(ctx context.Context, p Principal, id string) (Esim, error)
	ListEsims(ctx context.Context, p Principal, q EsimQuery) (esims []Esim, total int, err error)
	// ActivationCode is what the QR image of token encodes; ErrNotFound
	// for a token no eSIM has.
	ActivationCode(ctx context.Context, token string) (string, error)
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
