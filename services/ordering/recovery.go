package ordering

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

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

// WithOrderLocked runs fn under the order's lock, the one its requests and
// recovery take, unless someone holds it: false then, and fn did not run.
// The canceller works an order's profiles this way, never at once with
// the order's own processing. ErrNotFound when there is no such order.
func (s *Service) WithOrderLocked(ctx context.Context, id uuid.UUID, fn func(context.Context, Locked) error) (bool, error) {
	o, err := s.store.Order(ctx, nil, id)
	if err != nil {
		return false, err
	}
	return s.store.WithTryLock(ctx, lockKey(o.Scope, o.IdempotencyKey, o.ID), fn)
}
