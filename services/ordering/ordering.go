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
// request, its retries and the recovery loops of every replica never
// handle one order at once.
//
// An order that reaches its final status writes its event in the same
// transaction (an outbox), and a relay publishes the events afterwards:
// the platform hears of every finished order, at least once, whether or
// not Kafka was up when it finished.
package ordering

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/esimplatform/esim/proto/limits"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
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

// Order is a purchase of Quantity eSIMs of one plan. The plan's name and
// data are copied onto it when it is priced, so that finishing the order
// never needs the catalogue: a plan retired after the debit must not keep
// an order from completing or failing.
type Order struct {
	ID    uuid.UUID
	Scope Scope
	// IdempotencyKey is "" for an order placed without one.
	IdempotencyKey string
	// Fingerprint is the SHA-256 of the request (see fingerprint), which
	// a replay must match.
	Fingerprint []byte
	PlanID      uuid.UUID
	PlanName    string
	PerDay      bool
	Unlimited   bool
	TotalBytes  int64
	// ValidityDays is each eSIM's: the plan's on fixed plans, the days
	// ordered on per-day plans.
	ValidityDays int32
	Quantity     int32
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

// Install is how a traveller installs an eSIM.
type Install struct {
	Instructions         string
	IOSUniversalLink     string
	AndroidUniversalLink string
}

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

// IssueRequest is what a provider needs to issue an order's profiles.
type IssueRequest struct {
	// OrderID makes Issue idempotent: issuing the same order again returns
	// the same profiles, never a second set.
	OrderID           uuid.UUID
	Environment       Environment
	Quantity          int32
	PlanID            uuid.UUID
	PlanName          string
	ValidityDays      int32
	CustomerReference string
}

// Provider issues eSIM profiles.
type Provider interface {
	// Issue returns Quantity profiles for the order, the same ones on every
	// call for one order. An error wrapping ErrProviderFailed is a
	// definitive refusal (the order fails and is refunded); any other
	// leaves the outcome unknown, and the same call may be made again.
	Issue(ctx context.Context, req IssueRequest) ([]Profile, error)
}

// Releaser is a provider that holds profiles of its own at its upstream:
// Release gives back whatever a failed order holds there, but a profile
// whose ICCID another eSIM has (an upstream that issued it twice). It is
// idempotent, and called whenever a failing order is resumed, so that an
// order failed after its profiles were issued (ErrICCIDInUse) gives them
// back too.
type Releaser interface {
	Release(ctx context.Context, orderID uuid.UUID) error
}

// Checker is a provider an operator can check: Check calls it harmlessly
// and says what it answered; an error says why it could not be reached.
type Checker interface {
	Check(ctx context.Context) (string, error)
	// Describe names the provider's kind and where it is.
	Describe() (kind, target string)
}

// ProviderCheck is what CheckProvider found.
type ProviderCheck struct {
	// Provider is the kind, "" when the environment has none.
	Provider string
	Target   string
	OK       bool
	Detail   string
}

// CheckProvider checks the provider of env, for operators.
func (s *Service) CheckProvider(ctx context.Context, env Environment) (ProviderCheck, error) {
	if !env.Valid() {
		return ProviderCheck{}, invalid("environment", "must be sandbox or live")
	}
	p, ok := s.providers[env]
	if !ok || p == nil {
		return ProviderCheck{Detail: fmt.Sprintf("no %s provider is configured: its orders fail and are refunded", env)}, nil
	}
	c, ok := p.(Checker)
	if !ok {
		return ProviderCheck{Provider: "unknown", Detail: "this provider cannot be checked"}, nil
	}
	kind, target := c.Describe()
	detail, err := c.Check(ctx)
	if err != nil {
		return ProviderCheck{Provider: kind, Target: target, Detail: err.Error()}, nil
	}
	return ProviderCheck{Provider: kind, Target: target, OK: true, Detail: detail}, nil
}

// OrderQuery selects a page of orders.
type OrderQuery struct {
	// Scope nil is every account and environment (operators).
	Scope *Scope
	// Status "" is any; StatusPending matches failing orders too.
	Status Status
	// Reference "" is any; otherwise customer.reference exactly.
	Reference string
	Limit     int32
	Offset    int64
}

// EsimQuery selects a page of eSIMs.
type EsimQuery struct {
	Scope *Scope
	// OrderID uuid.Nil is any.
	OrderID uuid.UUID
	// ICCID "" is any.
	ICCID  string
	Limit  int32
	Offset int64
}

// Store persists orders and eSIMs and serialises the processing of each
// order. Implementations return ErrNotFound as documented and wrap every
// other failure.
type Store interface {
	// WithLock runs fn holding the lock named key, waiting for it as long
	// as ctx allows, and releases it when fn returns. Waiting holds no
	// database connection: one order's retries queue at no cost to other
	// partners. A wait that ctx ends is ErrBusy. Everything fn does
	// through Locked runs on the lock's own connection, and the context fn
	// gets carries that connection for providers that keep their records
	// in the same database. Holders are bounded per replica, so they never
	// take the connections that reads need.
	WithLock(ctx context.Context, key string, fn func(context.Context, Locked) error) error
	// WithTryLock is WithLock without waiting: false, fn not run, when
	// someone else holds the lock or every holder's place is taken.
	WithTryLock(ctx context.Context, key string, fn func(context.Context, Locked) error) (bool, error)
	// Order returns the order with its eSIMs; ErrNotFound outside scope
	// (nil scope: any).
	Order(ctx context.Context, scope *Scope, id uuid.UUID) (Order, error)
	// ListOrders returns a page of orders, each with its eSIMs, newest
	// first (ties by id), and the total count, in one snapshot.
	ListOrders(ctx context.Context, q OrderQuery) ([]Order, int64, error)
	// Esim returns ErrNotFound outside scope (nil scope: any).
	Esim(ctx context.Context, scope *Scope, id uuid.UUID) (Esim, error)
	// ListEsims returns a page of eSIMs, newest first (ties by id), and
	// the total count, in one snapshot.
	ListEsims(ctx context.Context, q EsimQuery) ([]Esim, int64, error)
	// EsimByQRToken returns ErrNotFound for an unknown token.
	EsimByQRToken(ctx context.Context, token string) (Esim, error)
	// UnfinishedOrders returns up to limit pending or failing orders
	// created before the given time, oldest first, without their eSIMs.
	UnfinishedOrders(ctx context.Context, createdBefore time.Time, limit int32) ([]Order, error)
}

// Locked is the store as the holder of an order's lock uses it.
type Locked interface {
	// ClaimInFlight counts the order against its scope's orders in flight,
	// across replicas, until the lock is released: ErrTooManyInFlight when
	// max are in flight already.
	ClaimInFlight(ctx context.Context, scope Scope, max int) error
	// OrderByKey returns the order with its eSIMs; ErrNotFound if none.
	OrderByKey(ctx context.Context, scope Scope, key string) (Order, error)
	// OrderByID returns the order with its eSIMs; ErrNotFound if none.
	OrderByID(ctx context.Context, id uuid.UUID) (Order, error)
	// InsertOrder stores a pending order; ErrConflict if its key is taken.
	InsertOrder(ctx context.Context, o Order) error
	// DeletePending deletes the order, which must be pending.
	DeletePending(ctx context.Context, id uuid.UUID) error
	// MarkFailing moves a pending order to failing with its error.
	MarkFailing(ctx context.Context, id uuid.UUID, e OrderError) error
	// MarkFailed moves a failing order to failed and writes its event to
	// the outbox, in one transaction.
	MarkFailed(ctx context.Context, id uuid.UUID, e Event) error
	// Complete stores the eSIMs, moves the pending order to completed and
	// writes its event to the outbox, in one transaction.
	Complete(ctx context.Context, id uuid.UUID, esims []Esim, e Event) error
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
	// Outbox and Publisher relay the events of finished orders
	// (PublishEvents); without them orders still write their events,
	// which wait.
	Outbox    Outbox
	Publisher Publisher
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
	outbox          Outbox
	publisher       Publisher
	// eventWritten holds one wake-up for the relay once an order's event
	// is committed: one pending wake-up covers any number of events.
	eventWritten chan struct{}
	now          func() time.Time
}

// NewService returns the use cases over d.
func NewService(d Deps) *Service {
	or := func(v, def time.Duration) time.Duration {
		if v <= 0 {
			return def
		}
		return v
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
		outbox:          d.Outbox,
		publisher:       d.Publisher,
		eventWritten:    make(chan struct{}, 1),
		now:             time.Now,
	}
}

// NewOrder is the input of CreateOrder, as the caller sent it.
type NewOrder struct {
	Scope    Scope
	Currency Currency
	// IdempotencyKey "" places the order without replay protection.
	IdempotencyKey string
	// PlanID is the plan's UUID as sent.
	PlanID string
	// Quantity nil means 1.
	Quantity *int32
	// Days nil means 1 on per-day plans and none on fixed plans.
	Days     *int32
	Customer Customer
}

// Created is CreateOrder's answer.
type Created struct {
	Order Order
	// Replayed is true when an earlier call with the same key made the
	// order and this one only returned it.
	Replayed bool
}

// request is a NewOrder that passed the static checks.
type request struct {
	NewOrder
	planID      uuid.UUID
	quantity    int32
	fingerprint []byte
}

// CreateOrder buys eSIMs: it prices the order, debits the wallet, has the
// environment's provider issue the profiles and completes the order; or,
// when the provider fails, refunds it and returns it failed (not an
// error). With an idempotency key, a call that finds the key used returns
// that order (Replayed), finishing it first if an earlier call was cut
// short; the same key with another request is ErrIdempotencyMismatch.
// ErrInsufficientFunds, ErrTooManyInFlight, validation errors and
// ErrNotFound store nothing; ErrBusy says the call processing the same key
// did not finish within LockWait, and changed nothing. Any other error leaves the order pending, to be finished by a retry
// with the same key or by Recover, never charged twice.
func (s *Service) CreateOrder(ctx context.Context, in NewOrder) (Created, error) {
	req, err := validateNewOrder(in)
	if err != nil {
		return Created{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Created{}, fmt.Errorf("new order id: %w", err)
	}
	var out Created
	// The wait for a call processing the same key is bounded on its own;
	// the processing, once the lock is held, by orderTimeout.
	waitCtx, cancelWait := context.WithTimeout(ctx, s.lockWait)
	defer cancelWait()
	err = s.store.WithLock(waitCtx, lockKey(in.Scope, in.IdempotencyKey, id), func(ctx context.Context, tx Locked) error {
		// From here on the order is processed to its end whatever the
		// caller does: a caller hanging up between the debit and the
		// completion must not leave the work half done.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.orderTimeout)
		defer cancel()
		if in.IdempotencyKey != "" {
			o, err := tx.OrderByKey(ctx, in.Scope, in.IdempotencyKey)
			switch {
			case err == nil:
				if !bytes.Equal(o.Fingerprint, req.fingerprint) {
					return ErrIdempotencyMismatch
				}
				if o.Status.Finished() {
					out = Created{Order: o, Replayed: true}
					return nil
				}
				// An earlier call was cut short: finish its order.
				if err := tx.ClaimInFlight(ctx, in.Scope, s.maxInFlight); err != nil {
					return err
				}
				o, err = s.resume(ctx, tx, o)
				out = Created{Order: o}
				return err
			case !errors.Is(err, ErrNotFound):
				return fmt.Errorf("look up idempotency key: %w", err)
			}
		}
		if err := tx.ClaimInFlight(ctx, in.Scope, s.maxInFlight); err != nil {
			return err
		}
		o, err := s.newOrder(ctx, id, req)
		if err != nil {
			return err
		}
		if err := tx.InsertOrder(ctx, o); err != nil {
			return fmt.Errorf("insert order %s: %w", o.ID, err)
		}
		o, err = s.resume(ctx, tx, o)
		out = Created{Order: o}
		return err
	})
	if err != nil {
		return Created{}, err
	}
	s.present(&out.Order)
	return out, nil
}

// newOrder prices req with the plan from the catalogue.
func (s *Service) newOrder(ctx context.Context, id uuid.UUID, req request) (Order, error) {
	plan, err := s.catalogue.Plan(ctx, req.planID, req.Currency)
	if err != nil {
		return Order{}, fmt.Errorf("plan %s in %s: %w", req.planID, req.Currency, err)
	}
	if err := checkPlan(plan); err != nil {
		return Order{}, fmt.Errorf("plan %s from the catalogue: %w", plan.ID, err)
	}
	o := Order{
		ID:             id,
		Scope:          req.Scope,
		IdempotencyKey: req.IdempotencyKey,
		Fingerprint:    req.fingerprint,
		PlanID:         plan.ID,
		PlanName:       plan.Name,
		PerDay:         plan.Type == PlanPerDay,
		Unlimited:      plan.Unlimited,
		TotalBytes:     plan.TotalBytes,
		Quantity:       req.quantity,
		Currency:       req.Currency,
		Customer:       req.Customer,
		Status:         StatusPending,
		CreatedAt:      input.Now(s.now),
	}
	multiplier := int64(1)
	if o.PerDay {
		o.Days = 1
		if req.Days != nil {
			o.Days = *req.Days
		}
		o.ValidityDays = o.Days
		multiplier = int64(o.Days)
	} else {
		if req.Days != nil && *req.Days != 1 {
			return Order{}, invalid("days", "must be 1 or left out: the plan is not priced per day")
		}
		o.ValidityDays = plan.ValidityDays
	}
	unit, ok := multiply(plan.Price, multiplier)
	total, ok2 := multiply(unit, int64(o.Quantity))
	if !ok || !ok2 {
		return Order{}, fmt.Errorf("plan %s: %d x %d days x %d eSIMs overflows", plan.ID, plan.Price, multiplier, o.Quantity)
	}
	o.UnitMinor, o.TotalMinor = unit, total
	return o, nil
}

// checkPlan refuses a plan that cannot be sold as it came: a fault of the
// catalogue, never of the caller.
func checkPlan(p Plan) error {
	switch {
	case p.Price <= 0:
		return fmt.Errorf("price %d is not positive", p.Price)
	case p.Type != PlanFixed && p.Type != PlanPerDay:
		return fmt.Errorf("unknown plan type %q", p.Type)
	case p.Type == PlanFixed && p.ValidityDays <= 0:
		return fmt.Errorf("fixed plan valid for %d days", p.ValidityDays)
	case p.Type == PlanPerDay && !p.Unlimited:
		return errors.New("per-day plan without unlimited data")
	case p.Unlimited != (p.TotalBytes == 0) || p.TotalBytes < 0:
		return fmt.Errorf("data: unlimited %t with %d bytes", p.Unlimited, p.TotalBytes)
	case p.Name == "":
		return errors.New("plan without a name")
	}
	return nil
}

// multiply returns a×b for non-negative a and b, and false on overflow.
func multiply(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || (b != 0 && a > math.MaxInt64/b) {
		return 0, false
	}
	return a * b, true
}

// resume takes an unfinished order, held under its lock, to its end:
// debit, issue, complete; or, once its provider failed for good, refund
// and fail. Every step may have run before (the order is what an earlier
// call, cut short, left behind) and is idempotent by the order id. ctx is
// already detached from the caller.
func (s *Service) resume(ctx context.Context, tx Locked, o Order) (Order, error) {
	if o.Status == StatusPending {
		var err error
		if o, err = s.debitAndIssue(ctx, tx, o); err != nil || o.Status == StatusCompleted {
			return o, err
		}
	}
	if o.Status != StatusFailing {
		return Order{}, fmt.Errorf("order %s: cannot resume an order that is %s", o.ID, o.Status)
	}
	if r, ok := s.providers[o.Scope.Environment].(Releaser); ok {
		if err := r.Release(ctx, o.ID); err != nil {
			return Order{}, fmt.Errorf("order %s: give back its profiles: %w", o.ID, err)
		}
	}
	if err := s.wallet.Refund(ctx, o.Scope, o.ID.String()); err != nil {
		return Order{}, fmt.Errorf("order %s: refund: %w", o.ID, err)
	}
	e, err := s.newEvent(EventOrderFailed, o.ID)
	if err != nil {
		return Order{}, err
	}
	if err := tx.MarkFailed(ctx, o.ID, e); err != nil {
		return Order{}, fmt.Errorf("order %s: mark failed: %w", o.ID, err)
	}
	s.signalEventWritten()
	o.Status = StatusFailed
	return o, nil
}

// maxErrorMessage bounds what a provider's message may add to an order.
const maxErrorMessage = 500

// debitAndIssue debits a pending order and has it issued: it returns the
// order completed, or failing when the provider refused for good (the
// refund is then due), or an error that leaves it pending.
func (s *Service) debitAndIssue(ctx context.Context, tx Locked, o Order) (Order, error) {
	err := s.wallet.Debit(ctx, o.Scope, o.Currency, o.TotalMinor, o.ID.String())
	if _, refused := errors.AsType[*ValidationError](err); refused || errors.Is(err, ErrInsufficientFunds) {
		// Nothing moved. The order goes, so that its key is free for the
		// same request after a top-up.
		if derr := tx.DeletePending(ctx, o.ID); derr != nil {
			return Order{}, fmt.Errorf("order %s: debit refused (%v), then delete: %w", o.ID, err, derr)
		}
		return Order{}, err
	}
	if err != nil {
		return Order{}, fmt.Errorf("order %s: debit: %w", o.ID, err)
	}

	issueCtx, cancel := context.WithTimeout(ctx, s.providerTimeout)
	esims, err := s.issue(issueCtx, o)
	cancel()
	switch {
	case errors.Is(err, ErrProviderFailed):
		return s.markFailing(ctx, tx, o, err)
	case err != nil:
		return Order{}, fmt.Errorf("order %s: issue: %w", o.ID, err)
	}
	e, err := s.newEvent(EventOrderCompleted, o.ID)
	if err != nil {
		return Order{}, err
	}
	err = tx.Complete(ctx, o.ID, esims, e)
	if errors.Is(err, ErrICCIDInUse) {
		// A fault of the provider's, and a lasting one: every retry
		// would get the same profiles. The order fails like any other
		// provider failure.
		return s.markFailing(ctx, tx, o, fmt.Errorf("%w: %w", ErrProviderFailed, err))
	}
	if err != nil {
		return Order{}, fmt.Errorf("order %s: complete: %w", o.ID, err)
	}
	s.signalEventWritten()
	o.Status, o.Esims = StatusCompleted, esims
	return o, nil
}

// markFailing records that the provider failed o for good, cause naming
// why, and returns o failing: its refund is due. Recorded before the
// refund, so an order that crashes between the two is refunded by whoever
// resumes it, and never issued again.
func (s *Service) markFailing(ctx context.Context, tx Locked, o Order, cause error) (Order, error) {
	oe := OrderError{Code: ErrorCodeProvider, Message: truncate(cause.Error(), maxErrorMessage)}
	if err := tx.MarkFailing(ctx, o.ID, oe); err != nil {
		return Order{}, fmt.Errorf("order %s: mark failing: %w", o.ID, err)
	}
	o.Status, o.Error = StatusFailing, &oe
	return o, nil
}

// truncate cuts s to at most n characters.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// issue has the environment's provider issue the order's profiles and
// makes the order's eSIMs of them.
func (s *Service) issue(ctx context.Context, o Order) ([]Esim, error) {
	p, ok := s.providers[o.Scope.Environment]
	if !ok || p == nil {
		return nil, fmt.Errorf("%w: no %s provider is configured", ErrProviderFailed, o.Scope.Environment)
	}
	profiles, err := p.Issue(ctx, IssueRequest{
		OrderID:           o.ID,
		Environment:       o.Scope.Environment,
		Quantity:          o.Quantity,
		PlanID:            o.PlanID,
		PlanName:          o.PlanName,
		ValidityDays:      o.ValidityDays,
		CustomerReference: o.Customer.Reference,
	})
	if err != nil {
		return nil, err
	}
	if len(profiles) != int(o.Quantity) {
		return nil, fmt.Errorf("the provider issued %d profiles for %d eSIMs", len(profiles), o.Quantity)
	}
	now := input.Now(s.now)
	esims := make([]Esim, len(profiles))
	for i, p := range profiles {
		if err := checkProfile(p); err != nil {
			return nil, fmt.Errorf("the provider's profile %d: %w", i, err)
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("new eSIM id: %w", err)
		}
		esims[i] = Esim{
			ID:           id,
			OrderID:      o.ID,
			Position:     int32(i),
			PlanName:     o.PlanName,
			ICCID:        p.ICCID,
			MatchingID:   p.MatchingID,
			SMDPAddress:  p.SMDPAddress,
			QRToken:      newQRToken(),
			Status:       EsimAllocated,
			ValidityDays: o.ValidityDays,
			Data:         EsimData{Unlimited: o.Unlimited, TotalBytes: o.TotalBytes, UpdatedAt: now},
			CreatedAt:    now,
		}
	}
	return esims, nil
}

// checkProfile refuses what would make an activation code that does not
// parse or an ICCID the contract does not promise.
func checkProfile(p Profile) error {
	if !ValidICCID(p.ICCID) {
		return fmt.Errorf("ICCID %q is not 18 to 20 digits starting 89 with a Luhn check digit", p.ICCID)
	}
	for name, v := range map[string]string{"matching id": p.MatchingID, "SM-DP+ address": p.SMDPAddress} {
		if v == "" || len(v) > 255 || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' || r == '$' }) {
			return fmt.Errorf("%s %q is not 1 to 255 printable ASCII characters without spaces or $", name, v)
		}
	}
	return nil
}

// ValidICCID reports whether s is an ICCID as the platform keeps them:
// 18 to 20 digits (19 for the sandbox's and most SM-DP+s'), starting 89
// (telecommunications), the last a Luhn check digit.
func ValidICCID(s string) bool {
	return len(s) >= 18 && len(s) <= 20 && strings.HasPrefix(s, "89") && LuhnValid(s)
}

// LuhnValid reports whether s is all digits and its last digit is the
// Luhn check digit of the others.
func LuhnValid(s string) bool {
	if s == "" {
		return false
	}
	sum := 0
	for i := range len(s) {
		c := s[len(s)-1-i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if i%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// newQRToken returns the unguessable last element of an eSIM's QR image
// URL: 256 random bits, base64url.
func newQRToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// qrTokenLength is the length of newQRToken's tokens.
const qrTokenLength = 43

// present fills in what is derived from an order's stored fields.
func (s *Service) present(o *Order) {
	for i := range o.Esims {
		s.presentEsim(&o.Esims[i])
	}
}

// presentEsim fills in an eSIM's activation code, QR image URL and
// install instructions from its stored fields.
func (s *Service) presentEsim(e *Esim) {
	e.ActivationCode = "LPA:1$" + e.SMDPAddress + "$" + e.MatchingID
	e.QRCodeURL = s.qrBaseURL + "/" + e.QRToken + ".png"
	carddata := url.QueryEscape(e.ActivationCode)
	e.Install = Install{
		Instructions:         instructions(e.SMDPAddress, e.MatchingID, e.ActivationCode),
		IOSUniversalLink:     "https://esimsetup.apple.com/esim_qrcode_provisioning?carddata=" + carddata,
		AndroidUniversalLink: "https://esimsetup.android.com/esim_qrcode_provisioning?carddata=" + carddata,
	}
}

// instructions are the install steps in plain text, with the values a
// traveller types where the QR code cannot be scanned (the eSIM is
// installed on the phone that shows the code, say).
func instructions(smdp, matchingID, activationCode string) string {
	return "iPhone (iOS 17.4 or later):\n" +
		"1. Connect to Wi-Fi and open Settings > Mobile Service (Cellular on some models) > Add eSIM.\n" +
		"2. Tap Use QR Code and scan the QR code. Without a camera, tap Enter Details Manually and enter\n" +
		"   SM-DP+ Address: " + smdp + "\n" +
		"   Activation Code: " + matchingID + "\n" +
		"3. Follow the prompts, label the eSIM, and turn on Data Roaming for it when you arrive.\n" +
		"\n" +
		"Android (Pixel, Samsung and most others):\n" +
		"1. Connect to Wi-Fi and open Settings > Network & internet > SIMs > Add SIM > Download a SIM instead?\n" +
		"2. Scan the QR code. Without a camera, choose Need help? > Enter it manually and enter the activation code\n" +
		"   " + activationCode + "\n" +
		"3. Follow the prompts, and turn on Roaming for this eSIM when you arrive.\n"
}

// GetOrder returns the order with its eSIMs; ErrNotFound outside scope.
// A nil scope (operators) reads any order.
func (s *Service) GetOrder(ctx context.Context, scope *Scope, id uuid.UUID) (Order, error) {
	if err := validScope(scope); err != nil {
		return Order{}, err
	}
	o, err := s.store.Order(ctx, scope, id)
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

// GetEsim returns the eSIM; ErrNotFound outside scope.
func (s *Service) GetEsim(ctx context.Context, scope *Scope, id uuid.UUID) (Esim, error) {
	if err := validScope(scope); err != nil {
		return Esim{}, err
	}
	e, err := s.store.Esim(ctx, scope, id)
	if err != nil {
		return Esim{}, fmt.Errorf("get eSIM %s: %w", id, err)
	}
	s.presentEsim(&e)
	return e, nil
}

// EsimFilter is what ListEsims selects.
type EsimFilter struct {
	Scope *Scope
	// OrderID uuid.Nil is any.
	OrderID uuid.UUID
	// ICCID "" is any.
	ICCID       string
	Page, Limit int32
}

// EsimPage is one page of eSIMs and the total across all pages.
type EsimPage struct {
	Esims []Esim
	Total int64
}

// maxICCIDLength is the longest ICCID of ITU-T E.118, whatever issued it.
const maxICCIDLength = 22

// ListEsims returns eSIMs newest first.
func (s *Service) ListEsims(ctx context.Context, f EsimFilter) (EsimPage, error) {
	if err := validScope(f.Scope); err != nil {
		return EsimPage{}, err
	}
	if f.ICCID != "" && (len(f.ICCID) > maxICCIDLength || strings.ContainsFunc(f.ICCID, func(r rune) bool { return r < '0' || r > '9' })) {
		return EsimPage{}, invalid("iccid", fmt.Sprintf("must be an ICCID: up to %d digits", maxICCIDLength))
	}
	limit, offset, err := paging(f.Page, f.Limit)
	if err != nil {
		return EsimPage{}, err
	}
	esims, total, err := s.store.ListEsims(ctx, EsimQuery{Scope: f.Scope, OrderID: f.OrderID, ICCID: f.ICCID, Limit: limit, Offset: offset})
	if err != nil {
		return EsimPage{}, fmt.Errorf("list eSIMs: %w", err)
	}
	for i := range esims {
		s.presentEsim(&esims[i])
	}
	return EsimPage{Esims: esims, Total: total}, nil
}

// ActivationCode returns the activation code behind a QR token, for the
// public QR image; ErrNotFound for a token no eSIM has.
func (s *Service) ActivationCode(ctx context.Context, token string) (string, error) {
	if len(token) != qrTokenLength || strings.ContainsFunc(token, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		// Cannot be a token: answered without a query, and never echoed.
		return "", ErrNotFound
	}
	e, err := s.store.EsimByQRToken(ctx, token)
	if err != nil {
		return "", fmt.Errorf("activation code: %w", err)
	}
	s.presentEsim(&e)
	return e.ActivationCode, nil
}

// Recovered is what a recovery pass did with one unfinished order.
type Recovered struct {
	OrderID uuid.UUID
	Scope   Scope
	// Skipped: someone else (a request, another replica) holds the order.
	Skipped bool
	// Deleted: the wallet refused the debit (Err says why: insufficient
	// funds, or its validation error), so the order went, as a request
	// would have deleted it.
	Deleted bool
	// Status is the order's status once recovered, or as found when Err
	// says why it could not be.
	Status Status
	Err    error
}

// RecoveryBatch is the most orders one recovery pass handles; the next
// pass takes the rest.
const RecoveryBatch = 100

// Recover finishes orders left unfinished for longer than olderThan by a
// crash, a timeout or a caller that never came back: the pending are
// resumed (debited if they were not, issued, completed, or refunded), the
// failing refunded. Each is taken under its lock without waiting, so an
// order a request or another replica is handling is skipped, and the same
// order is never handled twice at once. An order whose debit is refused is
// deleted, as a request would have done.
func (s *Service) Recover(ctx context.Context, olderThan time.Duration) ([]Recovered, error) {
	orders, err := s.store.UnfinishedOrders(ctx, input.Now(s.now).Add(-olderThan), RecoveryBatch)
	if err != nil {
		return nil, fmt.Errorf("recover: list unfinished orders: %w", err)
	}
	var out []Recovered
	for _, stale := range orders {
		if ctx.Err() != nil {
			break
		}
		r := Recovered{OrderID: stale.ID, Scope: stale.Scope}
		locked, err := s.store.WithTryLock(ctx, lockKey(stale.Scope, stale.IdempotencyKey, stale.ID), func(ctx context.Context, tx Locked) error {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.orderTimeout)
			defer cancel()
			// Read again under the lock: whoever held it may have
			// finished the order since it was listed.
			o, err := tx.OrderByID(ctx, stale.ID)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			r.Status = o.Status
			if o.Status.Finished() {
				return nil
			}
			done, err := s.resume(ctx, tx, o)
			if _, refused := errors.AsType[*ValidationError](err); refused || errors.Is(err, ErrInsufficientFunds) {
				r.Deleted, r.Status = true, ""
			}
			if err != nil {
				return err
			}
			r.Status = done.Status
			return nil
		})
		r.Skipped, r.Err = !locked && err == nil, err
		out = append(out, r)
	}
	return out, nil
}

// lockKey names the lock an order is processed under: its idempotency key
// within its scope, so that concurrent calls with one key queue, or its
// id when it has no key. Recover takes the same one.
func lockKey(scope Scope, idempotencyKey string, orderID uuid.UUID) string {
	if idempotencyKey != "" {
		return "ordering/key/" + scope.AccountID.String() + "/" + string(scope.Environment) + "/" + idempotencyKey
	}
	return "ordering/order/" + orderID.String()
}

// validateNewOrder checks everything that needs no lookup, and
// fingerprints the request.
func validateNewOrder(in NewOrder) (request, error) {
	if err := validScope(&in.Scope); err != nil {
		return request{}, err
	}
	if !in.Currency.Valid() {
		return request{}, invalid("currency", "must be one of USD, EUR, GBP")
	}
	req := request{NewOrder: in, quantity: 1}
	switch {
	case in.PlanID == "":
		return request{}, invalid("plan_id", "is required")
	case len(in.PlanID) != 36:
		return request{}, invalid("plan_id", "must be a UUID such as 0195f0c4-1c2d-7abc-8def-0123456789ab")
	default:
		id, err := uuid.Parse(in.PlanID)
		if err != nil {
			return request{}, invalid("plan_id", "must be a UUID such as 0195f0c4-1c2d-7abc-8def-0123456789ab")
		}
		req.planID = id
	}
	if in.Quantity != nil {
		if *in.Quantity < 1 || *in.Quantity > MaxQuantity {
			return request{}, invalid("quantity", fmt.Sprintf("must be between 1 and %d", MaxQuantity))
		}
		req.quantity = *in.Quantity
	}
	if in.Days != nil && (*in.Days < 1 || *in.Days > MaxDays) {
		return request{}, invalid("days", fmt.Sprintf("must be between 1 and %d", MaxDays))
	}
	if err := validText("customer.name", in.Customer.Name, MaxCustomerText); err != nil {
		return request{}, err
	}
	if err := validEmail(in.Customer.Email); err != nil {
		return request{}, err
	}
	if err := validText("customer.reference", in.Customer.Reference, MaxCustomerText); err != nil {
		return request{}, err
	}
	if err := validIdempotencyKey(in.IdempotencyKey); err != nil {
		return request{}, err
	}
	req.fingerprint = fingerprint(req.planID, req.quantity, in.Days, in.Customer)
	return req, nil
}

// fingerprint is the SHA-256 of what makes a request the same request: the
// plan, the quantity with its default applied, the days as sent (or their
// absence) and the customer. Each field is length-prefixed, so that no two
// different requests encode alike.
func fingerprint(planID uuid.UUID, quantity int32, days *int32, c Customer) []byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("esim.ordering.v1.CreateOrder")
	field(planID.String())
	field(strconv.Itoa(int(quantity)))
	if days == nil {
		field("-")
	} else {
		field(strconv.Itoa(int(*days)))
	}
	field(c.Name)
	field(c.Email)
	field(c.Reference)
	return h.Sum(nil)
}

func validScope(scope *Scope) error {
	if scope == nil {
		return nil
	}
	if scope.AccountID == uuid.Nil {
		return invalid("scope.account_id", "is required")
	}
	if !scope.Environment.Valid() {
		return invalid("scope.environment", "must be sandbox or live")
	}
	return nil
}

// validText checks display text as stored: it is the partner's own, kept
// as sent (a reference is matched exactly), and printable.
func validText(field, s string, maxChars int) error {
	if reason := input.TextReason(s, maxChars); reason != "" {
		return invalid(field, reason)
	}
	return nil
}

// validEmail accepts "" or one bare address as RFC 5322 writes it
// ("traveller@example.com"), not a display name or a list.
func validEmail(s string) error {
	if s == "" {
		return nil
	}
	if utf8.RuneCountInString(s) > MaxEmailLength {
		return invalid("customer.email", fmt.Sprintf("must be at most %d characters", MaxEmailLength))
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return invalid("customer.email", "must be an email address such as traveller@example.com")
	}
	return nil
}

// validIdempotencyKey accepts "" (no key) or up to MaxIdempotencyKey
// printable ASCII characters.
func validIdempotencyKey(k string) error {
	if len(k) > MaxIdempotencyKey {
		return invalid(FieldIdempotencyKey, fmt.Sprintf("must be at most %d characters", MaxIdempotencyKey))
	}
	if strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r > '~' }) {
		return invalid(FieldIdempotencyKey, "must be printable ASCII characters")
	}
	return nil
}

// paging checks a requested page and page size (0 means page 1 and
// DefaultPageLimit) and returns the limit and offset to read.
func paging(page, limit int32) (int32, int64, error) {
	rules := input.Pages{DefaultLimit: DefaultPageLimit, MaxLimit: MaxPageLimit, MaxPage: MaxPage}
	p, field, reason := rules.Check(int(page), int(limit))
	if reason != "" {
		return 0, 0, invalid(field, reason)
	}
	return int32(p.Limit), int64(p.Offset()), nil
}
