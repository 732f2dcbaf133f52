package ordering

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

// NewTopUp is the input of CreateTopUp, as the caller sent it.
type NewTopUp struct {
	Scope          Scope
	Currency       Currency
	IdempotencyKey string
	EsimID         uuid.UUID
	// PlanID is the plan's UUID as sent.
	PlanID string
	// Days nil means 1 on per-day plans and none on fixed plans.
	Days *int32
}

// CreatedTopUp is CreateTopUp's answer.
type CreatedTopUp struct {
	TopUp    TopUp
	Replayed bool
}

// CreateTopUp buys more of the same for an eSIM: a fixed plan adds its
// bytes and validity days, a per-day plan the days bought. It is a
// purchase like CreateOrder, with its money, idempotency, replay and
// errors: ErrNotFound for an eSIM or plan the caller cannot see, a
// *ValidationError naming plan_id for a plan that does not match the
// eSIM's (another type, or not covering one of its countries) and naming
// id for an EXPIRED eSIM; a provider's refusal answers the top-up failed
// and refunded.
func (s *Service) CreateTopUp(ctx context.Context, in NewTopUp) (CreatedTopUp, error) {
	if err := validScope(&in.Scope); err != nil {
		return CreatedTopUp{}, err
	}
	if !in.Currency.Valid() {
		return CreatedTopUp{}, invalid("currency", "must be one of USD, EUR, GBP")
	}
	if in.EsimID == uuid.Nil {
		return CreatedTopUp{}, ErrNotFound
	}
	planID, err := parsePlanID(in.PlanID)
	if err != nil {
		return CreatedTopUp{}, err
	}
	if in.Days != nil && (*in.Days < 1 || *in.Days > MaxDays) {
		return CreatedTopUp{}, invalid("days", fmt.Sprintf("must be between 1 and %d", MaxDays))
	}
	if err := validIdempotencyKey(in.IdempotencyKey); err != nil {
		return CreatedTopUp{}, err
	}
	created, err := s.purchase(ctx, in.Scope, in.IdempotencyKey, topUpFingerprint(in.EsimID, planID, in.Days), func(ctx context.Context, id uuid.UUID) (Order, error) {
		return s.newTopUp(ctx, id, in, planID)
	})
	if err != nil {
		return CreatedTopUp{}, err
	}
	e, err := s.store.Esim(ctx, &in.Scope, created.Order.EsimID)
	if err != nil {
		return CreatedTopUp{}, fmt.Errorf("top-up %s: read its eSIM: %w", created.Order.ID, err)
	}
	return CreatedTopUp{TopUp: TopUpOf(created.Order, e.OrderID), Replayed: created.Replayed}, nil
}

// parsePlanID is a plan id as sent, or a *ValidationError naming plan_id.
func parsePlanID(s string) (uuid.UUID, error) {
	if s == "" {
		return uuid.Nil, invalid("plan_id", "is required")
	}
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, invalid("plan_id", "must be a UUID such as 0195f0c4-1c2d-7abc-8def-0123456789ab")
	}
	return id, nil
}

// topUpFingerprint is what makes a top-up request the same request. Its
// first field sets it apart from every order's: a key used for an order
// and then for a top-up is a mismatch.
func topUpFingerprint(esimID, planID uuid.UUID, days *int32) []byte {
	h := sha256.New()
	for _, f := range []string{"esim.ordering.v1.CreateTopUp", esimID.String(), planID.String(), daysField(days)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

func daysField(days *int32) string {
	if days == nil {
		return "-"
	}
	return strconv.Itoa(int(*days))
}

// newTopUp prices a top-up of in.EsimID with the plan from the catalogue.
func (s *Service) newTopUp(ctx context.Context, id uuid.UUID, in NewTopUp, planID uuid.UUID) (Order, error) {
	e, err := s.store.Esim(ctx, &in.Scope, in.EsimID)
	if err != nil {
		return Order{}, fmt.Errorf("eSIM %s: %w", in.EsimID, err)
	}
	if e.Status == EsimExpired {
		return Order{}, invalid("id", "the eSIM has expired and cannot be topped up; order a new eSIM")
	}
	plan, err := s.catalogue.Plan(ctx, planID, in.Currency)
	if err != nil {
		return Order{}, fmt.Errorf("plan %s in %s: %w", planID, in.Currency, err)
	}
	if err := checkPlan(plan); err != nil {
		return Order{}, fmt.Errorf("plan %s from the catalogue: %w", plan.ID, err)
	}
	if err := CompatibleTopUp(e, plan); err != nil {
		return Order{}, err
	}
	o := Order{
		ID:             id,
		Kind:           KindTopUp,
		EsimID:         e.ID,
		Scope:          in.Scope,
		IdempotencyKey: in.IdempotencyKey,
		Fingerprint:    topUpFingerprint(in.EsimID, planID, in.Days),
		PlanID:         plan.ID,
		PlanName:       plan.Name,
		PerDay:         plan.Type == PlanPerDay,
		Unlimited:      plan.Unlimited,
		TotalBytes:     plan.TotalBytes,
		Countries:      plan.Countries,
		Quantity:       1,
		Currency:       in.Currency,
		Status:         StatusPending,
		CreatedAt:      input.Now(s.now),
	}
	multiplier := int64(1)
	if o.PerDay {
		o.Days = 1
		if in.Days != nil {
			o.Days = *in.Days
		}
		o.ValidityDays, multiplier = o.Days, int64(o.Days)
	} else {
		if in.Days != nil && *in.Days != 1 {
			return Order{}, invalid("days", "must be 1 or left out: the plan is not priced per day")
		}
		o.ValidityDays = plan.ValidityDays
	}
	total, ok := multiply(plan.Price, multiplier)
	if !ok {
		return Order{}, fmt.Errorf("plan %s: %d x %d days overflows", plan.ID, plan.Price, multiplier)
	}
	o.UnitMinor, o.TotalMinor = total, total
	return o, nil
}

// applyTopUp has a debited top-up applied: by the environment's network
// when it has one (the sandbox has none and applies it at once), then to
// the eSIM, with its event, in one transaction. It returns the top-up
// completed, or failing when the network refused for good or the eSIM
// expired meanwhile (the refund is then due), or an error that leaves it
// pending.
func (s *Service) applyTopUp(ctx context.Context, tx Locked, o Order) (Order, error) {
	if o.Scope.Environment != Sandbox {
		n, ok := s.networks[o.Scope.Environment]
		if !ok || n == nil {
			return s.markFailing(ctx, tx, o, fmt.Errorf("%w: no %s network is configured for top-ups", ErrProviderFailed, o.Scope.Environment))
		}
		e, err := s.store.Esim(ctx, nil, o.EsimID)
		if err != nil {
			return Order{}, fmt.Errorf("top-up %s: read its eSIM: %w", o.ID, err)
		}
		bundleCtx, cancel := context.WithTimeout(ctx, s.providerTimeout)
		err = n.AddBundle(bundleCtx, Bundle{TopUpID: o.ID, ICCID: e.ICCID, Bytes: o.TotalBytes, Days: o.ValidityDays})
		cancel()
		switch {
		case errors.Is(err, ErrProviderFailed):
			return s.markFailing(ctx, tx, o, err)
		case err != nil:
			return Order{}, fmt.Errorf("top-up %s: add the bundle: %w", o.ID, err)
		}
	}
	ev, err := s.newEvent(EventTopUpCompleted, o.ID)
	if err != nil {
		return Order{}, err
	}
	now := input.Now(s.now)
	err = tx.CompleteTopUp(ctx, o.ID, o.EsimID, func(e *Esim) error {
		return e.ApplyTopUp(o.TotalBytes, o.ValidityDays, now)
	}, ev)
	if errors.Is(err, ErrEsimExpired) {
		return s.markFailing(ctx, tx, o, fmt.Errorf("%w: %w", ErrProviderFailed, err))
	}
	if err != nil {
		return Order{}, fmt.Errorf("top-up %s: complete: %w", o.ID, err)
	}
	o.Status = StatusCompleted
	return o, nil
}
