package twirpserver

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/services/catalogue"
)

// errorCodes is the one table that turns the catalogue's errors into Twirp
// codes; callers (the gateway) branch on these codes, so a domain
// error missing here surfaces as internal rather than as a guess.
var errorCodes = []struct {
	is   func(error) bool
	code twirp.ErrorCode
}{
	{func(err error) bool { return errors.Is(err, catalogue.ErrNotFound) }, twirp.NotFound},
	{func(err error) bool { var ve *catalogue.ValidationError; return errors.As(err, &ve) }, twirp.InvalidArgument},
}

// contextCodes map a call cut short by its context: the caller gave up
// (the gateway's timeout closed the connection) or a deadline passed. These
// are not failures of the catalogue, so they are not Internal (logged at
// error level, and counted by callers as an outage). The caller gets a bare
// message, as from the accounts service: the storage error around a
// context error (a failed connection attempt, say) can name the database's
// user and host.
var contextCodes = []struct {
	err  error
	code twirp.ErrorCode
	msg  string
}{
	{context.Canceled, twirp.Canceled, "request canceled"},
	{context.DeadlineExceeded, twirp.DeadlineExceeded, "deadline exceeded"},
}

// toTwirp maps err through errorCodes. Invalid arguments carry the field in
// the "argument" meta (Twirp's convention) and the reason in "reason", so
// the gateway can fill error.details without parsing messages. A call cut
// short by its context is answered with a bare message; its cause is logged
// at debug level only, for tracing a timeout through (the caller's own log
// says why it gave up). Anything unmapped is logged with the request's ids
// and answered as internal, without its text: database errors are not for
// callers.
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
	for _, c := range contextCodes {
		if errors.Is(err, c.err) {
			level, msg := slog.LevelDebug, "catalogue call cut short by its context"
			if httpserver.CutByShutdown(ctx) {
				level, msg = slog.LevelWarn, "catalogue call cut short by the service's shutdown"
			}
			log.Log(ctx, level, msg, "method", method, "code", string(c.code), "error", err)
			return twirp.WrapError(twirp.NewError(c.code, c.msg), err)
		}
	}
	log.ErrorContext(ctx, "catalogue call failed", "method", method, "error", err)
	return twirp.InternalError("internal error")
}
