package twirpserver

import (
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/twirperr"
	"github.com/esimplatform/esim/services/webhook"
)

// errorCodes is the one table that turns the webhook service's errors
// into Twirp codes.
var errorCodes = twirperr.Codes{
	twirperr.Validation(func(ve *webhook.ValidationError) (string, string) { return ve.Field, ve.Reason }),
	twirperr.Sentinel(webhook.ErrNotFound, twirp.NotFound),
}

// toTwirp answers a domain error for the wire through errorCodes. Whatever
// else fails reaches the caller as a bare "internal error" (or a context
// code), its cause wrapped inside for the server's hooks to log.
func toTwirp(err error) error { return errorCodes.Convert(err) }
