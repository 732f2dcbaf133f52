// Package gateway is the public edge of the platform: it authenticates API
// keys, rate-limits them and answers the partner API by calling the services
// that own the data. It owns nothing durable.
package gateway

import (
	"context"
	"time"
)

// Environment is where a request runs; the API key's record decides it.
type Environment string

const (
	Sandbox Environment = "sandbox"
	Live    Environment = "live"
)

// Principal is who is calling: the account, environment and key behind a
// valid API key.
type Principal struct {
	AccountID   string
	Environment Environment
	KeyID       string
	// Currency is the account's currency; plans are priced in it.
	Currency string
	// RateLimitPerMinute is the account's own limit; 0 means the gateway's
	// default.
	RateLimitPerMinute int
}

// PlanType distinguishes a data bundle from unlimited data sold per day.
type PlanType string

const (
	Fixed  PlanType = "fixed"
	PerDay PlanType = "per_day"
)

// Plan is a catalogue plan as a partner sees it: one price, in the account's
// currency.
type Plan struct {
	ID         string
	Name       string
	Type       PlanType
	Scope      string
	Countries  []string
	Region     string
	Unlimited  bool
	TotalBytes int64
	// ValidityDays is 0 on per-day plans: the eSIM lasts the days ordered.
	ValidityDays int
	// PriceMinor is in minor units of Currency; per day on per-day plans.
	PriceMinor int64
	Currency   string
	Status     string
}

// PlanQuery selects a page of plans. Page is 1-based.
type PlanQuery struct {
	Country string
	// Covers keeps only plans covering every one of these countries.
	Covers   []string
	Type     PlanType
	Currency string
	Page     int
	Limit    int
}

// Accounts resolves API keys.
type Accounts interface {
	// Authenticate answers ErrUnauthorized for unknown, malformed and
	// revoked keys alike.
	Authenticate(ctx context.Context, secret string) (Principal, error)
}

// Catalogue reads plans.
type Catalogue interface {
	ListPlans(ctx context.Context, q PlanQuery) (plans []Plan, total int, err error)
	// GetPlan answers ErrNotFound for unknown and retired plans and for
	// plans not priced in currency.
	GetPlan(ctx context.Context, id, currency string) (Plan, error)
}

// RateDecision is the outcome of one rate-limit check.
type RateDecision struct {
	Allowed   bool
	Limit     int
	Remaining int
	// ResetAfter is when the caller is back to its full allowance.
	ResetAfter time.Duration
}

// RateLimiter admits or refuses one request of a key.
type RateLimiter interface {
	Allow(ctx context.Context, key string, perMinute int) (RateDecision, error)
}

// Gate admits a partner's request: it authenticates the key, then charges
// the request to the key's allowance, the account's own limit or, where
// the account has none, DefaultRateLimit.
type Gate struct {
	Accounts         Accounts
	Limiter          RateLimiter
	DefaultRateLimit int
}

// Admit returns who is calling and what the request left of the key's
// allowance. A refused key is ErrUnauthorized and has no allowance to
// report; a request over the limit is ErrRateLimited, with the decision
// that says when the key may try again. Any other error is ours.
func (g Gate) Admit(ctx context.Context, secret string) (Principal, RateDecision, error) {
	p, err := g.Accounts.Authenticate(ctx, secret)
	if err != nil {
		return p, RateDecision{}, err
	}
	limit := p.RateLimitPerMinute
	if limit <= 0 {
		limit = g.DefaultRateLimit
	}
	d, err := g.Limiter.Allow(ctx, p.KeyID, limit)
	switch {
	case err != nil:
		return p, RateDecision{}, err
	case !d.Allowed:
		return p, d, ErrRateLimited
	}
	return p, d, nil
}
