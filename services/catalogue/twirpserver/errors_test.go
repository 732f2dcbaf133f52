package twirpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/services/catalogue"
)

// The catalogue's own errors keep what callers need: a not-found its
// message, an invalid argument its field and reason.
func TestDomainErrorsKeepTheirCodes(t *testing.T) {
	var twerr twirp.Error
	err := toTwirp(fmt.Errorf("get plan: %w", catalogue.ErrNotFound))
	if !errors.As(err, &twerr) || twerr.Code() != twirp.NotFound || twerr.Msg() != "get plan: plan not found" {
		t.Errorf("not found = %v", err)
	}
	err = toTwirp(catalogue.InField("plans[1]", &catalogue.ValidationError{Field: "name", Reason: "is required"}))
	if !errors.As(err, &twerr) || twerr.Code() != twirp.InvalidArgument ||
		twerr.Meta("argument") != "plans[1].name" || twerr.Meta("reason") != "is required" {
		t.Errorf("invalid argument = %v %v", err, twerr.MetaMap())
	}
}

// A context error, or any other failure, reaches the caller as a bare
// message with its code: the storage error around it can name the
// database's user and host. The cause stays wrapped, for the handler's
// hooks to log (twirperr's tests pin the levels).
func TestContextErrorsKeepStorageTextFromCallers(t *testing.T) {
	answers := map[error]string{
		context.Canceled:                       "canceled request canceled",
		context.DeadlineExceeded:               "deadline_exceeded deadline exceeded",
		errors.New("conn closed by pgbouncer"): "internal internal error",
	}
	for cause, want := range answers {
		storage := fmt.Errorf("list plans: failed to connect to `user=catalogue_owner database=catalogue host=db.internal`: %w", cause)
		err := toTwirp(storage)
		var twerr twirp.Error
		if !errors.As(err, &twerr) || string(twerr.Code())+" "+twerr.Msg() != want {
			t.Errorf("%v: answered %v, want %s", cause, err, want)
			continue
		}
		for _, leak := range []string{"user=", "host=", "catalogue_owner", "db.internal"} {
			if strings.Contains(twerr.Msg(), leak) || strings.Contains(fmt.Sprint(twerr.MetaMap()), leak) {
				t.Errorf("answer carries storage text %q: %q %v", leak, twerr.Msg(), twerr.MetaMap())
			}
		}
		if !errors.Is(err, cause) {
			t.Errorf("%v: cause not kept for the log: %v", cause, errors.Unwrap(err))
		}
	}
}
