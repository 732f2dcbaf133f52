package ordering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

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
	return s.purchase(ctx, in.Scope, in.IdempotencyKey, req.fingerprint, func(ctx context.Context, id uuid.UUID) (Order, error) {
		return s.newOrder(ctx, id, req)
	})
}

// purchase is what every purchase (an order of eSIMs, a top-up) goes
// through: under the lock of its idempotency key, the replay of a
// finished purchase with the same key, the resumption of one cut short,
// or a new one, priced by price, stored pending and taken to its end by
// resume. fingerprint is what a replay must match.
func (s *Service) purchase(ctx context.Context, scope Scope, key string, fingerprint []byte, price func(context.Context, uuid.UUID) (Order, error)) (Created, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Created{}, fmt.Errorf("new order id: %w", err)
	}
	var out Created
	// A flood of one partner's orders waits here, bounded, holding neither
	// a connection nor one of the replica's places, instead of each taking
	// both only to be refused (issue 33's profile: most of a one-partner
	// flood's cost was refusals, each retried). The gate only delays: the
	// store's count decides, so a replay still needs no place.
	gateKey := scope.AccountID.String() + "/" + string(scope.Environment)
	if s.inFlight.Enter(ctx, gateKey, inFlightWait) {
		defer s.inFlight.Leave(gateKey)
	}
	// The wait for a call processing the same key is bounded on its own;
	// the processing, once the lock is held, by orderTimeout.
	waitCtx, cancelWait := context.WithTimeout(ctx, s.lockWait)
	defer cancelWait()
	err = s.store.WithLock(waitCtx, lockKey(scope, key, id), func(ctx context.Context, tx Locked) error {
		// From here on the order is processed to its end whatever the
		// caller does: a caller hanging up between the debit and the
		// completion must not leave the work half done.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.orderTimeout)
		defer cancel()
		if key != "" {
			o, err := tx.OrderByKey(ctx, scope, key)
			switch {
			case err == nil:
				if !bytes.Equal(o.Fingerprint, fingerprint) {
					return ErrIdempotencyMismatch
				}
				if o.Status.Finished() {
					out = Created{Order: o, Replayed: true}
					return nil
				}
				// An earlier call was cut short: finish its order.
				if err := tx.ClaimInFlight(ctx, scope, s.maxInFlight); err != nil {
					return err
				}
				o, err = s.resume(ctx, tx, o)
				out = Created{Order: o}
				return err
			case !errors.Is(err, ErrNotFound):
				return fmt.Errorf("look up idempotency key: %w", err)
			}
		}
		if err := tx.ClaimInFlight(ctx, scope, s.maxInFlight); err != nil {
			return err
		}
		o, err := price(ctx, id)
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
		Kind:           KindEsims,
		Scope:          req.Scope,
		IdempotencyKey: req.IdempotencyKey,
		Fingerprint:    req.fingerprint,
		PlanID:         plan.ID,
		PlanName:       plan.Name,
		PerDay:         plan.Type == PlanPerDay,
		Unlimited:      plan.Unlimited,
		TotalBytes:     plan.TotalBytes,
		Countries:      plan.Countries,
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
	o, err := s.finish(ctx, tx, o)
	if err == nil && o.Status.Finished() && s.finished != nil {
		s.finished(ctx, o)
	}
	return o, err
}

// finish is resume's work: the steps left of o, up to its final status.
func (s *Service) finish(ctx context.Context, tx Locked, o Order) (Order, error) {
	if o.Status == StatusPending {
		var err error
		if o, err = s.debitAndIssue(ctx, tx, o); err != nil || o.Status == StatusCompleted {
			return o, err
		}
	}
	if o.Status != StatusFailing {
		return Order{}, fmt.Errorf("order %s: cannot resume an order that is %s", o.ID, o.Status)
	}
	if r, ok := s.providers[o.Scope.Environment].(Releaser); ok && o.Kind != KindTopUp {
		if err := r.Release(ctx, tx, o.ID); err != nil {
			return Order{}, fmt.Errorf("order %s: give back its profiles: %w", o.ID, err)
		}
	}
	if err := s.wallet.Refund(ctx, o.Scope, o.ID.String()); err != nil {
		return Order{}, fmt.Errorf("order %s: refund: %w", o.ID, err)
	}
	failed := EventOrderFailed
	if o.Kind == KindTopUp {
		failed = EventTopUpFailed
	}
	e, err := s.newEvent(failed, o.ID)
	if err != nil {
		return Order{}, err
	}
	if err := tx.MarkFailed(ctx, o.ID, e); err != nil {
		return Order{}, fmt.Errorf("order %s: mark failed: %w", o.ID, err)
	}
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
	if o.Kind == KindTopUp {
		return s.applyTopUp(ctx, tx, o)
	}

	issueCtx, cancel := context.WithTimeout(ctx, s.providerTimeout)
	esims, err := s.issue(issueCtx, tx, o)
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
func (s *Service) issue(ctx context.Context, tx Locked, o Order) ([]Esim, error) {
	p, ok := s.providers[o.Scope.Environment]
	if !ok || p == nil {
		return nil, fmt.Errorf("%w: no %s provider is configured", ErrProviderFailed, o.Scope.Environment)
	}
	profiles, err := p.Issue(ctx, tx, IssueRequest{
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
			Scope:        o.Scope,
			PlanID:       o.PlanID,
			PerDay:       o.PerDay,
			Countries:    o.Countries,
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

// lockKey names the lock an order is processed under: its idempotency key
// within its scope, so that concurrent calls with one key queue, or its
// id when it has no key. Recover takes the same one.
func lockKey(scope Scope, idempotencyKey string, orderID uuid.UUID) string {
	if idempotencyKey != "" {
		return "ordering/key/" + scope.AccountID.String() + "/" + string(scope.Environment) + "/" + idempotencyKey
	}
	return "ordering/order/" + orderID.String()
}
