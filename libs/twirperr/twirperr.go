// Package twirperr is the error boundary every Twirp service shares: it
// answers a domain's error for the wire and logs what the answer leaves out.
//
// A service keeps only its own table (Codes), {domain error -> Twirp code},
// and Convert does the rest: a call cut short by its context is Canceled or
// DeadlineExceeded, anything else is Internal. Both reach the caller with a
// bare message, since the storage error around them can name the
// database's host and user; the cause stays wrapped inside the answer for
// ServerHooks to log, and Twirp never sends a wrapped cause.
package twirperr

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/httpserver"
)

// A Rule answers the domain errors it recognises (ok true) and leaves the
// rest to the next rule.
type Rule func(err error) (answer twirp.Error, ok bool)

// Codes is a domain's table, {domain error -> Twirp code}: the one place a
// service says how its errors reach the wire. Callers (the gateway) branch
// on these codes, so a domain error missing here surfaces as internal
// rather than as a guess.
type Codes []Rule

// Sentinel answers err (and any error wrapping it, errors.Is) with code and
// the error's own text: domains wrap their sentinels with the ids the
// caller sent ("revoke key K of account A: not found"), which helps and
// reveals nothing.
func Sentinel(err error, code twirp.ErrorCode) Rule {
	return func(e error) (twirp.Error, bool) {
		if !errors.Is(e, err) {
			return nil, false
		}
		return twirp.NewError(code, e.Error()), true
	}
}

// Validation answers a domain's validation error, of type V, as an invalid
// argument: fieldReason reads the rejected field and the reason from it.
// The field goes in the "argument" meta (Twirp's convention) and the
// reason on its own in "reason" as well, so callers show it next to the
// field without parsing the message. The message is "field: reason":
// twirp.InvalidArgumentError's "field reason" reads only for a reason
// that starts with a verb ("is required"), not "want one of: ...".
func Validation[V error](fieldReason func(V) (field, reason string)) Rule {
	return func(err error) (twirp.Error, bool) {
		v, ok := errors.AsType[V](err)
		if !ok {
			return nil, false
		}
		field, reason := fieldReason(v)
		return twirp.NewError(twirp.InvalidArgument, field+": "+reason).WithMeta("argument", field).WithMeta("reason", reason), true
	}
}

// contextCodes map a call cut short by its context: the caller gave up
// (the gateway's timeout closed the connection) or a deadline passed. These
// are not failures of the service, so they are not Internal (logged at
// error level, and counted by callers as an outage).
var contextCodes = []struct {
	err  error
	code twirp.ErrorCode
	msg  string
}{
	{context.Canceled, twirp.Canceled, "request canceled"},
	{context.DeadlineExceeded, twirp.DeadlineExceeded, "deadline exceeded"},
}

// Convert answers err for the wire by the first of the rules that
// recognises it. A context error none recognises is Canceled or
// DeadlineExceeded, and anything else Internal, each with a bare message
// and err wrapped inside for ServerHooks to log.
func (codes Codes) Convert(err error) error {
	for _, rule := range codes {
		if answer, ok := rule(err); ok {
			return answer
		}
	}
	for _, c := range contextCodes {
		if errors.Is(err, c.err) {
			return twirp.WrapError(twirp.NewError(c.code, c.msg), err)
		}
	}
	return twirp.WrapError(twirp.InternalError("internal error"), err)
}

// ServerHooks log the errors whose cause the caller does not see, through
// the request's context so each line carries its request and trace ids.
// Internal errors are logged at error level with their cause. A call cut
// short by its context is logged at debug level, for tracing a timeout
// through (the caller's own log says why it gave up), or at warn level
// when the service's own shutdown cut it. Expected outcomes (not found,
// invalid argument and the like) are the caller's business and would only
// be noise. Causes are logged whole: services keep secrets out of their
// errors.
func ServerHooks(log *slog.Logger) *twirp.ServerHooks {
	return &twirp.ServerHooks{
		Error: func(ctx context.Context, twerr twirp.Error) context.Context {
			logError(ctx, log, twerr)
			return ctx
		},
	}
}

func logError(ctx context.Context, log *slog.Logger, twerr twirp.Error) {
	method, _ := twirp.MethodName(ctx)
	switch twerr.Code() {
	case twirp.Internal:
		log.ErrorContext(ctx, "twirp internal error", "method", method, "error", cause(twerr).Error())
	case twirp.Canceled, twirp.DeadlineExceeded:
		level, msg := slog.LevelDebug, "twirp call cut short by its context"
		if httpserver.CutByShutdown(ctx) {
			level, msg = slog.LevelWarn, "twirp call cut short by the service's shutdown"
		}
		log.Log(ctx, level, msg, "method", method, "code", string(twerr.Code()), "error", cause(twerr).Error())
	}
}

// cause is the error twerr wraps, or twerr itself.
func cause(twerr twirp.Error) error {
	if c := errors.Unwrap(twerr); c != nil {
		return c
	}
	return twerr
}
