package twirpserver

import (
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/twirperr"
	"github.com/esimplatform/esim/services/wallet"
)

// errorCodes is the one table that turns the wallet service's errors into
// Twirp codes. The references and ids the sentinels are wrapped with are
// the caller's own.
var errorCodes = twirperr.Codes{
	twirperr.Validation(func(ve *wallet.ValidationError) (string, string) { return ve.Field, ve.Reason }),
	twirperr.Sentinel(wallet.ErrNotFound, twirp.NotFound),
	twirperr.Sentinel(wallet.ErrConflict, twirp.AlreadyExists),
	// Ordering answers the partner 402 insufficient_funds on this, and
	// nothing else: the reason meta says it without parsing the message,
	// and leaves failed_precondition free for other preconditions.
	withMeta(twirperr.Sentinel(wallet.ErrInsufficientFunds, twirp.FailedPrecondition), "reason", "insufficient_funds"),
}

// withMeta adds a meta entry to what rule answers.
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
// code), its cause (SQL, connection details) wrapped inside for the
// server's hooks (twirperr.ServerHooks) to log.
func toTwirp(err error) error { return errorCodes.Convert(err) }
