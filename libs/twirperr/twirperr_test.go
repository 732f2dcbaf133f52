package twirperr_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twitchtv/twirp"
	"github.com/twitchtv/twirp/ctxsetters"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/twirperr"
)

type validationError struct{ field, reason string }

func (e *validationError) Error() string { return e.field + ": " + e.reason }

var (
	errNotFound = errors.New("not found")
	errConflict = errors.New("already exists")
	codes       = twirperr.Codes{
		twirperr.Sentinel(errNotFound, twirp.NotFound),
		twirperr.Validation(func(e *validationError) (string, string) { return e.field, e.reason }),
		twirperr.Sentinel(errConflict, twirp.AlreadyExists),
	}
)

// storageErr is a storage failure whose text names the database, around
// cause.
func storageErr(cause error) error {
	return fmt.Errorf("get thing: failed to connect to `user=owner database=things host=db.internal`: %w", cause)
}

func wantTwirp(t *testing.T, err error, code twirp.ErrorCode, msg string) twirp.Error {
	t.Helper()
	var twerr twirp.Error
	if !errors.As(err, &twerr) || twerr.Code() != code || twerr.Msg() != msg {
		t.Fatalf("err = %v, want Twirp %s %q", err, code, msg)
	}
	return twerr
}

func TestConvert(t *testing.T) {
	// A sentinel of the table keeps the text the domain wrapped it in.
	wantTwirp(t, codes.Convert(fmt.Errorf("get thing 42: %w", errNotFound)), twirp.NotFound, "get thing 42: not found")
	wantTwirp(t, codes.Convert(errConflict), twirp.AlreadyExists, "already exists")

	// Context errors and everything else are answered bare, the cause kept
	// inside for the hooks and never in the message or the meta.
	for _, tc := range []struct {
		cause error
		code  twirp.ErrorCode
		msg   string
	}{
		{context.Canceled, twirp.Canceled, "request canceled"},
		{context.DeadlineExceeded, twirp.DeadlineExceeded, "deadline exceeded"},
		{errors.New("connection refused"), twirp.Internal, "internal error"},
	} {
		err := codes.Convert(storageErr(tc.cause))
		twerr := wantTwirp(t, err, tc.code, tc.msg)
		if strings.Contains(twerr.Msg()+fmt.Sprint(twerr.MetaMap()), "db.internal") {
			t.Errorf("%s answer carries the storage text: %q %v", tc.code, twerr.Msg(), twerr.MetaMap())
		}
		if !errors.Is(err, tc.cause) {
			t.Errorf("%s answer lost its cause: %v", tc.code, errors.Unwrap(err))
		}
	}

	// The table's rules come first, in order: a sentinel wins over a
	// context error it was wrapped with, and over a later rule.
	both := fmt.Errorf("%w: %w", errNotFound, context.Canceled)
	wantTwirp(t, codes.Convert(both), twirp.NotFound, both.Error())
	first := fmt.Errorf("%w: %w", &validationError{"limit", "must be small"}, errConflict)
	wantTwirp(t, codes.Convert(first), twirp.InvalidArgument, "limit: must be small")
	// Without a table, a sentinel is internal.
	wantTwirp(t, twirperr.Codes(nil).Convert(errNotFound), twirp.Internal, "internal error")
}

// A validation error, wrapped or not, names the field in the "argument"
// meta and carries the reason alone in "reason".
func TestValidation(t *testing.T) {
	err := fmt.Errorf("list things: %w", &validationError{"limit", "want a whole number from 1 to 100"})
	twerr := wantTwirp(t, codes.Convert(err), twirp.InvalidArgument, "limit: want a whole number from 1 to 100")
	if twerr.Meta("argument") != "limit" || twerr.Meta("reason") != "want a whole number from 1 to 100" {
		t.Errorf("meta %v, want the field as argument and the reason alone", twerr.MetaMap())
	}
}

// logged runs the Error hook on twerr and returns the lines it logged.
func logged(t *testing.T, ctx context.Context, twerr twirp.Error) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx = ctxsetters.WithMethodName(ctx, "GetThing")
	twirperr.ServerHooks(log).Error(ctx, twerr)
	var recs []map[string]any
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

func TestServerHooksLogWhatCallersDoNotSee(t *testing.T) {
	shutdown, cut := context.WithCancelCause(context.Background())
	cut(httpserver.ErrShutdown)
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()

	for _, tc := range []struct {
		name        string
		ctx         context.Context
		cause       error
		level, msg  string
		code        string
		logsNothing bool
	}{
		{name: "internal", ctx: context.Background(), cause: errors.New("connection refused"),
			level: "ERROR", msg: "twirp internal error"},
		{name: "caller gave up", ctx: gaveUp, cause: context.Canceled,
			level: "DEBUG", msg: "twirp call cut short by its context", code: "canceled"},
		{name: "deadline passed", ctx: context.Background(), cause: context.DeadlineExceeded,
			level: "DEBUG", msg: "twirp call cut short by its context", code: "deadline_exceeded"},
		{name: "shutdown", ctx: shutdown, cause: context.Canceled,
			level: "WARN", msg: "twirp call cut short by the service's shutdown", code: "canceled"},
		{name: "expected outcome", ctx: context.Background(), cause: errNotFound, logsNothing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var twerr twirp.Error
			errors.As(codes.Convert(storageErr(tc.cause)), &twerr)
			recs := logged(t, tc.ctx, twerr)
			if tc.logsNothing {
				if len(recs) != 0 {
					t.Fatalf("logged %v, want nothing", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("logged %v, want one line", recs)
			}
			rec := recs[0]
			if rec["level"] != tc.level || rec["msg"] != tc.msg || rec["method"] != "GetThing" {
				t.Errorf("logged %v, want %s %q for GetThing", rec, tc.level, tc.msg)
			}
			if tc.code != "" && rec["code"] != tc.code {
				t.Errorf("logged code %v, want %s", rec["code"], tc.code)
			}
			if e, _ := rec["error"].(string); !strings.Contains(e, "db.internal") || !strings.Contains(e, tc.cause.Error()) {
				t.Errorf("logged error %q, want the whole cause", e)
			}
		})
	}

	// An error Twirp made itself, with no cause wrapped, is logged as it is.
	recs := logged(t, context.Background(), twirp.InternalError("failed to marshal the response"))
	if len(recs) != 1 || recs[0]["error"] != "twirp error internal: failed to marshal the response" {
		t.Errorf("logged %v, want the Twirp error itself", recs)
	}
}
