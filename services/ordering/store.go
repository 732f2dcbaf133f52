package ordering

import (
	"context"
	"time"

	"github.com/google/uuid"
)

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
	ICCID string
	// Status "" is any.
	Status string
	Limit  int32
	Offset int64
}

// Store persists orders and eSIMs and serialises the processing of each
// order. Implementations return ErrNotFound as documented and wrap every
// other failure.
type Store interface {
	LifecycleStore
	// WithLock runs fn holding the lock named key, waiting for it as long
	// as ctx allows, and releases it when fn returns. Waiting holds no
	// database connection: one order's retries queue at no cost to other
	// partners. A wait that ctx ends is ErrBusy. Everything fn does
	// through Locked runs on the lock's own connection, which is passed
	// on to providers that keep their records in the same database.
	// Holders are bounded per replica, so they never take the connections
	// that reads need.
	WithLock(ctx context.Context, key string, fn func(context.Context, Locked) error) error
	// WithTryLock is WithLock without waiting: false, fn not run, when
	// someone else holds the lock or every holder's place is taken.
	WithTryLock(ctx context.Context, key string, fn func(context.Context, Locked) error) (bool, error)
	// Order returns the order with its eSIMs, or the top-up; ErrNotFound
	// outside scope (nil scope: any).
	Order(ctx context.Context, scope *Scope, id uuid.UUID) (Order, error)
	// Orders returns the orders of lookups found in their scopes, each
	// with its eSIMs, or the top-up, in no particular order: a few round
	// trips however many lookups there are.
	Orders(ctx context.Context, lookups []OrderLookup) ([]Order, error)
	// ListOrders returns a page of orders of eSIMs (no top-ups), each with its eSIMs, newest
	// first (ties by id), and the total count, in one snapshot.
	ListOrders(ctx context.Context, q OrderQuery) ([]Order, int64, error)
	// Esim returns the eSIM with its top-ups; ErrNotFound outside scope
	// (nil scope: any).
	Esim(ctx context.Context, scope *Scope, id uuid.UUID) (Esim, error)
	// ListEsims returns a page of eSIMs with their top-ups, newest first
	// (ties by id), and the total count, in one snapshot.
	ListEsims(ctx context.Context, q EsimQuery) ([]Esim, int64, error)
	// SearchOrders returns up to q.Limit orders of eSIMs (no top-ups) of
	// the scope, each with its eSIMs, whose customer reference, or email
	// in any case, starts with q.Prefix: those by reference first, each
	// kind ordered by what matched.
	SearchOrders(ctx context.Context, q SearchQuery) ([]Order, error)
	// SearchEsims returns up to q.Limit eSIMs of the scope, with their
	// top-ups, whose ICCID starts with q.Prefix, by ICCID.
	SearchEsims(ctx context.Context, q SearchQuery) ([]Esim, error)
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
	// MarkFailed moves a failing order to failed and writes its event's
	// publication, in one transaction.
	MarkFailed(ctx context.Context, id uuid.UUID, e Event) error
	// Complete stores the eSIMs, moves the pending order to completed and
	// writes its event's publication, in one transaction.
	Complete(ctx context.Context, id uuid.UUID, esims []Esim, e Event) error
	// CompleteTopUp moves the pending top-up to completed, applies it to
	// its eSIM (apply, under the eSIM's row lock) and writes its event's
	// publication, in one transaction; apply's error rolls it back and
	// is returned.
	CompleteTopUp(ctx context.Context, id, esimID uuid.UUID, apply func(*Esim) error, e Event) error
}
