package twirpclient

import (
	"errors"
	"testing"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/services/gateway"
)

func TestTranslateMapsEachTwirpCodeOnce(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want error
	}{
		{twirp.NewError(twirp.Unauthenticated, "invalid API key"), gateway.ErrUnauthorized},
		{twirp.NotFoundError("plan x"), gateway.ErrNotFound},
		{twirp.InvalidArgumentError("country", "must be ISO").WithMeta("reason", "must be ISO"), gateway.ErrInvalid},
	} {
		if got := translate("svc", tc.in); !errors.Is(got, tc.want) {
			t.Errorf("%v -> %v, want %v", tc.in, got, tc.want)
		}
	}
	// Anything else is ours to fix: never a partner-facing code.
	for _, in := range []error{twirp.InternalError("boom"), twirp.NewError(twirp.Unavailable, "down"), errors.New("dial tcp: refused")} {
		got := translate("svc", in)
		for _, public := range []error{gateway.ErrUnauthorized, gateway.ErrNotFound, gateway.ErrInvalid, gateway.ErrRateLimited} {
			if errors.Is(got, public) {
				t.Errorf("%v -> %v, want an internal error", in, got)
			}
		}
	}
}

func TestTranslateNamesTheFieldAndReason(t *testing.T) {
	var verr *gateway.ValidationError
	err := translate("catalogue", twirp.InvalidArgumentError("country", "must be ISO").WithMeta("reason", "must be ISO"))
	if !errors.As(err, &verr) || verr.Fields[0] != (gateway.FieldError{Field: "country", Reason: "must be ISO"}) {
		t.Fatalf("got %#v", err)
	}
}
