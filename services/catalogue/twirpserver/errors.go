package twirpserver

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/services/catalogue"
)

// errorCodes is the one table that turns the catalogue's errors into Twirp
// codes; callers (the gateway, ordering) branch on these codes, so a domain
// error missing here surfaces as internal rather than as a guess.
var errorCodes = []struct {
	is   func(error) bool
	code twirp.ErrorCode
}{
	{func(err error) bool { return errors.Is(err, catalogue.ErrNotFound) }, twirp.NotFound},
	{func(err error) bool { var ve *catalogue.ValidationError; return errors.As(err, &ve) }, twirp.InvalidArgument},
	{func(err error) bool { return errors.Is(err, context.Canceled) }, twirp.Canceled},
	{func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }, twirp.DeadlineExceeded},
}

// toTwirp maps err through errorCodes. Invalid arguments carry the field in
// the "argument" meta (Twirp's convention) and the reason in "reason", so
// the gateway can fill error.details without parsing messages. Anything
// unmapped is logged with the request's ids and answered as internal,
// without its text: database errors are not for callers.
func toTwirp(ctx context.Context, log *slog.Logger, err error) error {
	for _, e := range errorCodes {
		if !e.is(err) {
			continue
		}
		if e.code == twirp.InvalidArgument {
			var ve *catalogue.ValidationError
			errors.As(err, &ve)
			return twirp.InvalidArgumentError(ve.Field, ve.Reason).WithMeta("reason", ve.Reason)
		}
		return twirp.NewError(e.code, err.Error())
	}
	method, _ := twirp.MethodName(ctx)
	log.ErrorContext(ctx, "catalogue call failed", "method", method, "error", err)
	return twirp.InternalError("internal error")
}
