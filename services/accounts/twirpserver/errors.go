package twirpserver

import (
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/twirperr"
	"github.com/esimplatform/esim/services/accounts"
)

// errorCodes is the one table that turns the accounts service's errors into
// Twirp codes. ErrUnauthenticated is always bare, and the ids the other
// sentinels are wrapped with are the caller's own.
var errorCodes = twirperr.Codes{
	twirperr.Validation(func(ve *accounts.ValidationError) (string, string) { return ve.Field, ve.Reason }),
	twirperr.Sentinel(accounts.ErrNotFound, twirp.NotFound),
	twirperr.Sentinel(accounts.ErrConflict, twirp.AlreadyExists),
	twirperr.Sentinel(accounts.ErrUnauthenticated, twirp.Unauthenticated),
}

// toTwirp answers a domain error for the wire through errorCodes. Whatever
// else fails reaches the caller as a bare "internal error" (or a context
// code), its cause (SQL, connection details) wrapped inside for the
// server's hooks (twirperr.ServerHooks) to log.
func toTwirp(err error) error { return errorCodes.Convert(err) }
