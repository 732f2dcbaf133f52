package twirpserver

import (
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/twirperr"
	"github.com/esimplatform/esim/services/ordering"
)

// errorCodes is the one table that turns the ordering service's errors
// into Twirp codes. ErrIdempotencyMismatch is a validation error on
// "Idempotency-Key", so the first rule answers it. ErrProviderFailed is
// not here: a provider's failure is a FAILED order, never an error.
var errorCodes = twirperr.Codes{
	twirperr.Validation(func(ve *ordering.ValidationError) (string, string) { return ve.Field, ve.Reason }),
	twirperr.Sentinel(ordering.ErrNotFound, twirp.NotFound),
	withMeta(twirperr.Sentinel(ordering.ErrInsufficientFunds, twirp.FailedPrecondition), "reason", "insufficient_funds"),
	twirperr.Sentinel(ordering.ErrTooManyInFlight, twirp.ResourceExhausted),
	// Not a fault of the service's: the call processing the key is still
	// at work, and a retry with the key replays or resumes its order.
	twirperr.Sentinel(ordering.ErrBusy, twirp.Unavailable),
}

// withMeta adds a meta to rule's answers, for callers that branch on more
// than the code: failed_precondition is the wallet's insufficient_funds
// only with reason=insufficient_funds, as the wallet answers it too.
func withMeta(rule twirperr.Rule, key, value string) twirperr.Rule {
	return func(err error) (twirp.Error, bool) {
		answer, ok := rule(err)
		if !ok {
			return nil, false
		}
		return answer.WithMeta(key, value), true
	}
}

// toTwirp answers a domain error for the wire through errorCodes. Whatever
// else fails reaches the caller as a bare "internal error" (or a context
// code), its cause wrapped inside for the server's hooks to log.
func toTwirp(err error) error { return errorCodes.Convert(err) }
