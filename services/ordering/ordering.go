// Package ordering owns orders and the eSIMs they issue: it prices an
// order from the catalogue, debits the wallet, has a provider issue the
// profiles, and completes the order or refunds it.
//
// Money moves here, so every step is idempotent and every order ends
// completed xor failed-and-refunded, whatever crashes, retries and
// timeouts interleave: the debit and its refund are keyed by the order id
// in the wallet, issuing is keyed by the order id at the provider, the
// order records durably how far it got (pending, failing), and one lock
// per order (per idempotency key when there is one) makes sure that a
// request, its retries and the recovery passes of every replica never
// handle one order at once.
//
// An order that reaches its final status writes its event in the same
// transaction (a job of the durable queue, River), published afterwards:
// the platform hears of every finished order, at least once, whether or
// not Kafka was up when it finished.
package ordering

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/scopegate"
	"github.com/esimplatform/esim/proto/limits"
)

// Currency is the ISO 4217 code an order is priced and debited in: the
// account's.
type Currency string

// The currencies the platform sells in.
const (
	USD Currency = "USD"
	EUR Currency = "EUR"
	GBP Currency = "GBP"
)

// Currencies lists them.
var Currencies = []Currency{USD, EUR, GBP}

// Valid reports whether c is a currency the platform sells in.
func (c Currency) Valid() bool { return slices.Contains(Currencies, c) }

// Environment separates test traffic from real money: every order and
// eSIM belongs to exactly one.
type Environment string

// The two environments.
const (
	Sandbox Environment = "sandbox"
	Live    Environment = "live"
)

// Valid reports whether e is sandbox or live.
func (e Environment) Valid() bool { return e == Sandbox || e == Live }

// Scope is whose orders a call reads or writes: one account in one
// environment.
type Scope struct {
	AccountID   uuid.UUID
	Environment Environment
}

// Status is where an order is in its processing.
type Status string

// An order is pending from its insertion until it completes; failing once
// its provider failed for good and until its refund is done; failed once
// refunded. Completed and failed are final.
const (
	StatusPending   Status = "pending"
	StatusFailing   Status = "failing"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
)

// Finished reports whether the order reached its final status.
func (s Status) Finished() bool { return s == StatusCompleted || s == StatusFailed }

// PlanType is how a plan is priced.
type PlanType string

// Fixed plans sell a data amount for a validity; per-day plans sell
// unlimited data priced per day ordered.
const (
	PlanFixed  PlanType = "fixed"
	PlanPerDay PlanType = "per_day"
)

// Plan is a catalogue plan as an order needs it, priced in one currency.
type Plan struct {
	ID         uuid.UUID
	Name       string
	Type       PlanType
	Unlimited  bool
	TotalBytes int64 // 0 when unlimited
	// ValidityDays is 0 on per-day plans, whose eSIMs are valid for the
	// days ordered.
	ValidityDays int32
	// Price is in minor units of the currency asked for; per day on
	// per-day plans.
	Price int64
	// Countries are the ISO 3166-1 alpha-2 codes the plan covers.
	Countries []string
}

// Customer is the traveller an order is for, stored for the partner's
// reporting only.
type Customer struct {
	Name      string
	Email     string
	Reference string
}

// OrderError says why an order failed.
type OrderError struct {
	Code    string
	Message string
}

// ErrorCodeProvider is the code of an order whose provider failed.
const ErrorCodeProvider = "provider_error"

// OrderKind is what an order buys.
type OrderKind string

// An order buys eSIMs, or a top-up buys more of the same for one eSIM: a
// top-up is an order of its own kind, so that it is priced, debited,
// provisioned, refunded, replayed and recovered by the same machinery.
const (
	KindEsims OrderKind = "esims"
	KindTopUp OrderKind = "topup"
)

// Order is a purchase of Quantity eSIMs of one plan. The plan's name and
// data are copied onto it when it is priced, so that finishing the order
// never needs the catalogue: a plan retired after the debit must not keep
// an order from completing or failing.
type Order struct {
	ID    uuid.UUID
	Kind  OrderKind
	Scope Scope
	// EsimID is the eSIM a top-up is for; uuid.Nil on orders of eSIMs.
	EsimID uuid.UUID
	// IdempotencyKey is "" for an order placed without one.
	IdempotencyKey string
	// Fingerprint is the SHA-256 of the request (see fingerprint), which
	// a replay must match.
	Fingerprint []byte
	PlanID      uuid.UUID
	PlanName    string
	PerDay      bool
	Unlimited   bool
	// TotalBytes is each eSIM's, or what a top-up adds.
	TotalBytes int64
	// ValidityDays is each eSIM's (or what a top-up adds): the plan's on
	// fixed plans, the days ordered on per-day plans.
	ValidityDays int32
	// Countries the plan covered when the order was priced: what a
	// top-up of its eSIMs must cover.
	Countries []string
	Quantity  int32
	// Days is 0 on fixed plans.
	Days       int32
	Currency   Currency
	UnitMinor  int64
	TotalMinor int64
	Customer   Customer
	Status     Status
	// Error is set on failing and failed orders.
	Error     *OrderError
	CreatedAt time.Time
	// Esims are the order's eSIMs by position: none unless completed.
	Esims []Esim
}

// EsimAllocated is the status of a freshly issued eSIM.
const EsimAllocated = "ALLOCATED"

// Profile is what a provider issues for one eSIM.
type Profile struct {
	ICCID       string
	MatchingID  string
	SMDPAddress string
}

// Esim is one issued profile. The stored fields come first; the ones
// after them are derived from those by the Service on every read, so the
// API and anything else that shows an eSIM agree on them.
type Esim struct {
	ID      uuid.UUID
	OrderID uuid.UUID
	Scope   Scope
	// PlanID, PerDay and Countries are the order's plan's: what a top-up
	// must match.
	PlanID    uuid.UUID
	PerDay    bool
	Countries []string
	// Position is the eSIM's place in its order, 0 to Quantity-1.
	Position     int32
	PlanName     string
	ICCID        string
	MatchingID   string
	SMDPAddress  string
	QRToken      string
	Status       string
	ValidityDays int32
	Data         EsimData
	CreatedAt    time.Time
	// InstalledAt, ActivatedAt and ExpiresAt are zero until the eSIM
	// reached the status that sets them; ExpiresAt moves with top-ups.
	InstalledAt time.Time
	ActivatedAt time.Time
	ExpiresAt   time.Time
	// UsageNotified is the highest of UsageThresholds told (0: none);
	// ExpiringNotified, whether esim.expiring was.
	UsageNotified    int32
	ExpiringNotified bool
	// TopUps are the eSIM's, oldest first (read with the eSIM, not
	// stored with it).
	TopUps []TopUp

	ActivationCode string
	QRCodeURL      string
	Install        Install
}

// EsimData is an eSIM's data allowance and use.
type EsimData struct {
	Unlimited  bool
	TotalBytes int64 // 0 when unlimited
	UsedBytes  int64
	UpdatedAt  time.Time
}

// TopUp is a top-up as the API shows it: an order of KindTopUp.
type TopUp struct {
	ID     uuid.UUID
	EsimID uuid.UUID
	// EsimOrderID is the order that issued the eSIM.
	EsimOrderID uuid.UUID
	Scope       Scope
	PlanID      uuid.UUID
	// Days added; Bytes added (0 on unlimited plans).
	Days        int32
	Bytes       int64
	Currency    Currency
	AmountMinor int64
	Status      Status
	Error       *OrderError
	CreatedAt   time.Time
}

// TopUpOf is the top-up an order of KindTopUp is, for the eSIM of order
// esimOrderID.
func TopUpOf(o Order, esimOrderID uuid.UUID) TopUp {
	status := o.Status
	if status == StatusFailing {
		status = StatusPending // failing is pending until refunded, as for orders
	}
	return TopUp{
		ID: o.ID, EsimID: o.EsimID, EsimOrderID: esimOrderID, Scope: o.Scope, PlanID: o.PlanID,
		Days: o.ValidityDays, Bytes: o.TotalBytes, Currency: o.Currency, AmountMinor: o.TotalMinor,
		Status: status, Error: o.Error, CreatedAt: o.CreatedAt,
	}
}

// Install is how a traveller installs an eSIM.
type Install struct {
	Instructions         string
	IOSUniversalLink     string
	AndroidUniversalLink string
}

// Catalogue prices plans.
type Catalogue interface {
	// Plan returns the active plan priced in currency: ErrNotFound when
	// the plan is unknown, retired or has no price in currency.
	Plan(ctx context.Context, id uuid.UUID, currency Currency) (Plan, error)
}

// Wallet moves the money of orders. Both calls are idempotent by
// reference, which is the order id.
type Wallet interface {
	// Debit takes amount from the scope's balance. ErrInsufficientFunds,
	// or a *ValidationError (the currency is not the balance's), when it
	// refuses: then nothing moved. Any other error leaves the outcome
	// unknown, and the same call may be made again.
	Debit(ctx context.Context, scope Scope, currency Currency, amount int64, reference string) error
	// Refund gives the debit with this reference back in full; again,
	// it succeeds and moves nothing.
	Refund(ctx context.Context, scope Scope, debitReference string) error
}

// Limits on what callers may send, as the public API states them (declared
// once, in proto/limits).
const (
	MaxQuantity         = limits.MaxQuantity
	MaxDays             = limits.MaxDays
	MaxCustomerText     = limits.MaxCustomerText
	MaxEmailLength      = limits.MaxEmailLength
	MaxIdempotencyKey   = limits.MaxIdempotencyKey
	DefaultPageLimit    = limits.DefaultPageLimit
	MaxPageLimit        = limits.MaxPageLimit
	MaxPage             = limits.MaxPage
	FieldIdempotencyKey = "Idempotency-Key"
)

// Defaults of the bounds on an order's processing (Deps).
const (
	DefaultOrderTimeout    = 30 * time.Second
	DefaultProviderTimeout = 15 * time.Second
	DefaultLockWait        = 30 * time.Second
	DefaultMaxInFlight     = 8
	// inFlightWait is how long an order of a scope whose orders in flight
	// fill this replica's slots waits for one; inFlightWaitersPerScope
	// (times MaxInFlight) and inFlightWaiters bound how many wait, for a
	// scope and in all. Past either, or the wait, the order asks the store
	// as every order does, and is refused there if the scope is full. A
	// waiter holds a goroutine and its caller's connection, nothing shared,
	// so a scope may take many: one left out is only refused as before.
	inFlightWait            = 2 * time.Second
	inFlightWaitersPerScope = 32
	inFlightWaiters         = 1024
)

// Deps are what the Service works with.
type Deps struct {
	Store     Store
	Catalogue Catalogue
	Wallet    Wallet
	// Providers issue the profiles of each environment. An environment
	// without one fails its orders as an outage would: refunded.
	Providers map[Environment]Provider
	// QRBaseURL is where the platform serves QR images, without a
	// trailing slash: an eSIM's image is QRBaseURL/<token>.png.
	QRBaseURL string
	// OrderTimeout bounds the processing of an order, which goes on when
	// its caller hangs up; 0 means DefaultOrderTimeout.
	OrderTimeout time.Duration
	// ProviderTimeout bounds the provider's work on one order within it, so
	// that a slow provider leaves the order time to fail and be refunded;
	// 0 means DefaultProviderTimeout.
	ProviderTimeout time.Duration
	// LockWait bounds how long a call waits for another call processing
	// the order of the same idempotency key (ErrBusy after it); 0 means
	// DefaultLockWait.
	LockWait time.Duration
	// MaxInFlight caps the orders of one account and environment being
	// processed at once, so that one partner's slow orders cannot hold
	// every place (ErrTooManyInFlight over it); 0 means
	// DefaultMaxInFlight.
	MaxInFlight int
	// Publisher publishes the events of finished orders (PublishEvent);
	// without it orders still write their events, which wait.
	Publisher Publisher
	// Networks are the mobile networks behind each environment's
	// provider: usage feeds and bundles. An environment without one
	// (the sandbox) moves its eSIMs by simulation and applies top-ups at
	// once.
	Networks map[Environment]Network
	// Now is the clock, time.Now when nil: tests move it.
	Now func() time.Time
	// Finished, when set, hears of each order this service takes to its
	// final status (completed or failed), as it gets there: the
	// server counts them for /metrics.
	Finished func(ctx context.Context, o Order)
}

// Service holds the ordering use cases.
type Service struct {
	store        Store
	catalogue    Catalogue
	wallet       Wallet
	providers    map[Environment]Provider
	qrBaseURL    string
	orderTimeout time.Duration
	// providerTimeout, lockWait and maxInFlight: Deps.
	providerTimeout time.Duration
	lockWait        time.Duration
	maxInFlight     int
	// inFlight holds this replica's orders of a scope past maxInFlight
	// for a slot (inFlightWait) before they ask the store for a place.
	inFlight  *scopegate.Gate
	publisher Publisher
	networks  map[Environment]Network
	now       func() time.Time
	finished  func(context.Context, Order)
}

// NewService returns the use cases over d.
func NewService(d Deps) *Service {
	or := func(v, def time.Duration) time.Duration {
		if v <= 0 {
			return def
		}
		return v
	}
	now := d.Now
	if now == nil {
		now = time.Now
	}
	maxInFlight := d.MaxInFlight
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	return &Service{
		store:           d.Store,
		catalogue:       d.Catalogue,
		wallet:          d.Wallet,
		providers:       d.Providers,
		qrBaseURL:       strings.TrimRight(d.QRBaseURL, "/"),
		orderTimeout:    or(d.OrderTimeout, DefaultOrderTimeout),
		providerTimeout: or(d.ProviderTimeout, DefaultProviderTimeout),
		lockWait:        or(d.LockWait, DefaultLockWait),
		maxInFlight:     maxInFlight,
		inFlight:        scopegate.New(maxInFlight, inFlightWaitersPerScope*maxInFlight, inFlightWaiters),
		publisher:       d.Publisher,
		networks:        d.Networks,
		now:             now,
		finished:        d.Finished,
	}
}
