package ordering

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

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
	// Providers that keep records in ordering's database write them
	// through tx, the holder of the order's lock.
	Issue(ctx context.Context, tx Locked, req IssueRequest) ([]Profile, error)
}

// Releaser is a provider that holds profiles of its own at its upstream:
// Release gives back whatever a failed order holds there, but a profile
// whose ICCID another eSIM has (an upstream that issued it twice). It is
// idempotent, and called whenever a failing order is resumed, so that an
// order failed after its profiles were issued (ErrICCIDInUse) gives them
// back too.
type Releaser interface {
	Release(ctx context.Context, tx Locked, orderID uuid.UUID) error
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
