package twirpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

// A context error reaches the caller as a bare message with its code: the
// storage error around it can name the database's user and host. The cause
// stays wrapped, and is logged at debug level only, never at error level.
func TestContextErrorsKeepStorageTextFromCallers(t *testing.T) {
	for _, tc := range []struct {
		cause error
		code  twirp.ErrorCode
		msg   string
	}{
		{context.Canceled, twirp.Canceled, "request canceled"},
		{context.DeadlineExceeded, twirp.DeadlineExceeded, "deadline exceeded"},
	} {
		t.Run(string(tc.code), func(t *testing.T) {
			logs := &telemetrytest.LogBuffer{}
			log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			storage := fmt.Errorf("list plans: failed to connect to `user=catalogue_owner database=catalogue host=db.internal`: %w", tc.cause)

			err := toTwirp(context.Background(), log, storage)
			var twerr twirp.Error
			if !errors.As(err, &twerr) || twerr.Code() != tc.code {
				t.Fatalf("err = %v, want Twirp %s", err, tc.code)
			}
			if twerr.Msg() != tc.msg {
				t.Errorf("message %q, want the bare %q", twerr.Msg(), tc.msg)
			}
			for _, leak := range []string{"user=", "host=", "catalogue_owner", "db.internal"} {
				if strings.Contains(twerr.Msg(), leak) || strings.Contains(fmt.Sprint(twerr.MetaMap()), leak) {
					t.Errorf("answer carries storage text %q: %q %v", leak, twerr.Msg(), twerr.MetaMap())
				}
			}
			if !errors.Is(err, tc.cause) {
				t.Errorf("cause not kept for the log: %v", errors.Unwrap(err))
			}
			got := logs.String()
			if !strings.Contains(got, `"level":"DEBUG"`) || !strings.Contains(got, "db.internal") {
				t.Errorf("cause not logged at debug level:\n%s", got)
			}
			if strings.Contains(got, `"level":"ERROR"`) {
				t.Errorf("a context error was logged at error level:\n%s", got)
			}
		})
	}
}
