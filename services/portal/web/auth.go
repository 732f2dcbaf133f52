package web

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/twitchtv/twirp"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// signInFailed is the one answer to an unknown email and a wrong
// password alike, so the form tells no one which emails have accounts.
const signInFailed = "Email or password is incorrect."

// currencies are what an account may be billed in.
var currencies = []string{"USD", "EUR", "GBP"}

type signUpData struct{ Currencies []string }

func (a *App) signUpPage(w http.ResponseWriter, r *http.Request) {
	a.render(w, r, http.StatusOK, "signup.html", view{Title: "Create your account", Form: map[string]string{"currency": "USD"}, Data: signUpData{currencies}})
}

func (a *App) signUp(w http.ResponseWriter, r *http.Request) {
	form := map[string]string{
		"email": strings.TrimSpace(r.PostFormValue("email")), "account_name": strings.TrimSpace(r.PostFormValue("account_name")),
		"currency": r.PostFormValue("currency"),
	}
	if !a.claimSignUp(w, r, "signup.html", view{Title: "Create your account", Form: form, Data: signUpData{currencies}}) {
		return
	}
	res, err := a.Accounts.SignUp(r.Context(), &accountsv1.SignUpRequest{
		Email: form["email"], Password: r.PostFormValue("password"), AccountName: form["account_name"], Currency: form["currency"],
	})
	if err != nil {
		v := view{Title: "Create your account", Form: form, Errors: map[string]string{}, Data: signUpData{currencies}}
		if field, msg, ok := fieldError(err, map[string]string{"email": "Email", "password": "Password", "account_name": "Account name", "name": "Account name", "currency": "Currency"}); ok {
			if field == "name" {
				field = "account_name"
			}
			v.Errors[field] = msg
		} else if code(err) == twirp.AlreadyExists {
			v.Errors["email"] = "An account already uses this email. Sign in instead."
		} else {
			a.fail(w, r, err)
			return
		}
		a.render(w, r, http.StatusBadRequest, "signup.html", v)
		return
	}
	a.setSessionCookie(w, res)
	http.Redirect(w, r, "/sandbox/", http.StatusSeeOther)
}

func (a *App) signInPage(w http.ResponseWriter, r *http.Request) {
	a.render(w, r, http.StatusOK, "signin.html", view{Title: "Sign in", Form: map[string]string{"next": localPath(r.URL.Query().Get("next"))}})
}

func (a *App) signIn(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	next := localPath(r.PostFormValue("next"))
	form := map[string]string{"email": email, "next": next}

	// Claimed before accounts is asked, so a guesser over the limit
	// learns nothing, not even a right password, and costs accounts
	// nothing; and claimed, not merely checked, so parallel attempts
	// cannot all pass the check before the first failure is counted.
	addr := clientAddress(r)
	allowed, wait, err := a.SignIns.Claim(r.Context(), strings.ToLower(email), addr)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !allowed {
		a.tooMany(w, r, wait, "signin.html", view{Title: "Sign in", Form: form}, "sign-in attempts")
		return
	}

	res, err := a.Accounts.SignIn(r.Context(), &accountsv1.SignInRequest{Email: email, Password: r.PostFormValue("password")})
	switch {
	case code(err) == twirp.Unauthenticated, code(err) == twirp.InvalidArgument:
		// A failure: the attempt stays counted. A malformed email is as
		// wrong as an unknown one.
		a.render(w, r, http.StatusUnauthorized, "signin.html", view{Title: "Sign in", Form: form, Error: signInFailed})
		return
	}
	// Signed in, or no verdict (accounts failed): not a failed sign-in,
	// so the attempt is given back.
	if rerr := a.SignIns.Release(r.Context(), strings.ToLower(email), addr); rerr != nil {
		// The attempt stays counted: one closer to the limit, no worse.
		a.Log.WarnContext(r.Context(), "could not give back a sign-in attempt", "err", rerr)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.setSessionCookie(w, res)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// tooMany answers a form over its limit: page with v and an error naming
// what was limited, 429 and Retry-After.
func (a *App) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, page string, v view, what string) {
	minutes := max(int(math.Ceil(wait.Minutes())), 1)
	w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(wait.Seconds()))))
	v.Error = fmt.Sprintf("Too many %s; try again in %d %s.", what, minutes, plural(minutes, "minute", "minutes"))
	a.render(w, r, http.StatusTooManyRequests, page, v)
}

// claimSignUp claims an attempt of the client's address at a form that
// makes a user (sign-up, invite acceptance), before accounts is asked to
// hash a password; false when it has answered instead: the limit's page
// (page with v) or the error page.
func (a *App) claimSignUp(w http.ResponseWriter, r *http.Request, page string, v view) bool {
	allowed, wait, err := a.SignUps.Claim(r.Context(), clientAddress(r))
	if err != nil {
		a.fail(w, r, err)
		return false
	}
	if !allowed {
		a.tooMany(w, r, wait, page, v, "attempts from your address")
		return false
	}
	return true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// clientAddress is the address the request came from. Forwarded headers
// are not read: anyone can send them. Behind a proxy every visitor shares
// its address, which SIGNIN_LIMIT_PER_ADDRESS and SIGNUP_LIMIT_PER_ADDRESS
// must then allow for.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (a *App) signOut(w http.ResponseWriter, r *http.Request, s *session) {
	if _, err := a.Accounts.SignOut(r.Context(), &accountsv1.SignOutRequest{Token: s.token}); err != nil && code(err) != twirp.Unauthenticated {
		a.fail(w, r, err)
		return
	}
	a.clearSessionCookie(w)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

func passwordView(s *session) view {
	return view{Title: "Change password", Session: s, Section: "settings", Errors: map[string]string{}}
}

func (a *App) passwordPage(w http.ResponseWriter, r *http.Request, s *session) {
	v := passwordView(s)
	if r.URL.Query().Get("done") == "1" {
		v.Notice = "Your password was changed, and every other session was signed out."
	}
	a.render(w, r, http.StatusOK, "password.html", v)
}

func (a *App) changePassword(w http.ResponseWriter, r *http.Request, s *session) {
	res, err := a.Accounts.ChangePassword(r.Context(), &accountsv1.ChangePasswordRequest{
		Token: s.token, CurrentPassword: r.PostFormValue("current_password"), NewPassword: r.PostFormValue("new_password"),
	})
	if err != nil {
		v := passwordView(s)
		if field, msg, ok := fieldError(err, map[string]string{"new_password": "New password", "password": "New password", "current_password": "Current password"}); ok {
			switch field {
			case "password":
				field = "new_password"
			case "current_password":
				msg = "Current password is incorrect."
			}
			v.Errors[field] = msg
		} else if c := code(err); c == twirp.Unauthenticated || c == twirp.PermissionDenied || c == twirp.FailedPrecondition {
			v.Errors["current_password"] = "Current password is incorrect."
		} else {
			a.fail(w, r, err)
			return
		}
		a.render(w, r, http.StatusBadRequest, "password.html", v)
		return
	}
	a.setSessionCookie(w, res)
	http.Redirect(w, r, "/settings/password?done=1", http.StatusSeeOther)
}

// query keeps the non-empty values of kv, in order, as a query string.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
