package twirpclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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

// TestIntermediarysRejectionIsOurFault: a 401 or 404 that a proxy in front
// of a service answers, not the service, says nothing about the partner's
// key or plan; the gateway must not turn it into (and cache) a rejection.
func TestIntermediarysRejectionIsOurFault(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusBadRequest} {
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "denied by the mesh", status)
		}))
		_, err := NewAccounts(proxy.URL, proxy.Client()).Authenticate(context.Background(), "sk_sandbox_x")
		proxy.Close()
		for _, public := range []error{gateway.ErrUnauthorized, gateway.ErrNotFound, gateway.ErrInvalid} {
			if err == nil || errors.Is(err, public) {
				t.Errorf("proxy answering %d: %v, want an internal error", status, err)
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
