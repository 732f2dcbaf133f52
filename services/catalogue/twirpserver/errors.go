package twirpserver

import (
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/twirperr"
	"github.com/esimplatform/esim/services/catalogue"
)

// errorCodes is the one table that turns the catalogue's errors into Twirp
// codes.
var errorCodes = twirperr.Codes{
	twirperr.Sentinel(catalogue.ErrNotFound, twirp.NotFound),
	twirperr.Validation(func(ve *catalogue.ValidationError) (string, string) { return ve.Field, ve.Reason }),
}

// toTwirp answers a domain error for the wire through errorCodes. Whatever
// else fails reaches the caller as a bare "internal error" (or a context
// code), its cause wrapped inside for the handler's hooks
// (twirperr.ServerHooks) to log: database errors are not for callers.
func toTwirp(err error) error { return errorCodes.Convert(err) }
