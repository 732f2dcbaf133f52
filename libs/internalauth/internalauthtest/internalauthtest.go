// Package internalauthtest gives tests the credentials of every caller, so
// they start services and call them as the platform does.
package internalauthtest

import (
	"net/http"
	"strings"

	"github.com/esimplatform/esim/libs/internalauth"
)

// Token is the test token of caller: fixed, so a test can build a client
// for any caller without passing tokens around.
func Token(caller internalauth.Caller) string {
	return "test-token-of-" + string(caller) + "-0123456789abcdefghijklmnop"
}

// Callers accepts the test token of each of callers, or of every caller
// the platform has when none is named.
func Callers(callers ...internalauth.Caller) internalauth.Callers {
	return internalauth.MustCallers(CallersEnv(callers...))
}

// CallersEnv is Callers as the CALLERS variable spells it.
func CallersEnv(callers ...internalauth.Caller) string {
	if len(callers) == 0 {
		callers = []internalauth.Caller{internalauth.Operator, internalauth.Gateway, internalauth.Ordering, internalauth.Portal}
	}
	entries := make([]string, len(callers))
	for i, c := range callers {
		entries[i] = internalauth.Entry(c, Token(c))
	}
	return strings.Join(entries, ",")
}

// Client is an HTTP client calling as caller.
func Client(caller internalauth.Caller) *http.Client {
	return internalauth.Client(&http.Client{}, Token(caller))
}

// As returns hc sending caller's test token.
func As(hc *http.Client, caller internalauth.Caller) *http.Client {
	return internalauth.Client(hc, Token(caller))
}
