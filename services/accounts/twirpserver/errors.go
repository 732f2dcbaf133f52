package twirpserver

import (
	"errors"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/twirperr"
	"github.com/esimplatform/esim/services/accounts"
)

// errorCodes is the one table that turns the accounts service's errors into
// Twirp codes. ErrUnauthenticated is always bare (the portal's variants
// carry their own fixed words), and the ids the other sentinels are
// wrapped with are the caller's own.
var errorCodes = twirperr.Codes{
	twirperr.Validation(func(ve *accounts.ValidationError) (string, string) { return ve.Field, ve.Reason }),
	// Before ErrConflict, which every ConflictError also is: the field
	// goes in "argument" as for validation errors, so the portal shows it
	// next to the field.
	conflictOnField,
	twirperr.Sentinel(accounts.ErrNotFound, twirp.NotFound),
	twirperr.Sentinel(accounts.ErrConflict, twirp.AlreadyExists),
	twirperr.Sentinel(accounts.ErrUnauthenticated, twirp.Unauthenticated),
	// reason tells callers this failed precondition from any other that
	// may come, without matching on the message.
	withMeta(twirperr.Sentinel(accounts.ErrLiveDisabled, twirp.FailedPrecondition), "reason", "live_disabled"),
	withMeta(twirperr.Sentinel(accounts.ErrLastUser, twirp.FailedPrecondition), "reason", "last_user"),
}

func conflictOnField(err error) (twirp.Error, bool) {
	ce, ok := errors.AsType[*accounts.ConflictError](err)
	if !ok {
		return nil, false
	}
	return twirp.NewError(twirp.AlreadyExists, ce.Error()).WithMeta("argument", ce.Field).WithMeta("reason", ce.Reason), true
}

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
