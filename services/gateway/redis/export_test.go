package redis

import (
	"context"

	"github.com/esimplatform/esim/services/gateway"
)

// CommandTimeout is the client's bound on each step of a command.
const CommandTimeout = commandTimeout

// Check is one rate-limit check of a batch, for tests of allowBatch.
type Check = rateCheck

func NewCheck(key string, perMinute int) Check { return rateCheck{key: key, perMinute: perMinute} }

// AllowBatch answers checks as one coalesced batch would.
func (l *RateLimiter) AllowBatch(ctx context.Context, checks []Check) ([]gateway.RateDecision, []error, error) {
	outs, err := l.allowBatch(ctx, checks)
	ds := make([]gateway.RateDecision, len(outs))
	errs := make([]error, len(outs))
	for i, o := range outs {
		ds[i], errs[i] = o.decision, o.err
	}
	return ds, errs, err
}
