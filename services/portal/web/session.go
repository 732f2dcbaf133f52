package web

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/twitchtv/twirp"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/portal"
)

// CookieName is the session cookie: the accounts session token itself,
// which accounts keeps only hashed.
const CookieName = "esim_session"

// session is the signed-in user of a request.
type session struct {
	token string
	*accountsv1.Session
}

func (s *session) accountID() string { return s.GetAccount().GetId() }
func (s *session) currency() string  { return s.GetAccount().GetCurrency() }

// envRequest is a signed-in request for a page of one environment.
type envRequest struct {
	*session
	env portal.Environment
}

// proto is the environment as the services name it.
func (e envRequest) proto() accountsv1.Environment {
	if e.env == portal.Live {
		return accountsv1.Environment_ENVIRONMENT_LIVE
	}
	return accountsv1.Environment_ENVIRONMENT_SANDBOX
}

func (a *App) setSessionCookie(w http.ResponseWriter, res *accountsv1.SessionResponse) {
	maxAge := int(time.Until(res.GetSession().GetExpiresAt().AsTime()).Seconds())
	if maxAge < 1 {
		maxAge = 1
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: res.GetToken(), Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: a.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
}

func (a *App) clearSessionCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: a.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
}

// currentSession asks accounts whose the request's cookie is; errNoSession
// without a cookie or for a token accounts no longer knows.
func (a *App) currentSession(r *http.Request) (*session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, errNoSession
	}
	s, err := a.Accounts.GetSession(r.Context(), &accountsv1.GetSessionRequest{Token: c.Value})
	if err != nil {
		if code(err) == twirp.Unauthenticated {
			return nil, errNoSession
		}
		return nil, err
	}
	return &session{token: c.Value, Session: s}, nil
}

// signedIn serves h to a signed-in user, and sends anyone else to sign
// in, back to this page afterwards.
func (a *App) signedIn(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := a.currentSession(r)
		if err == errNoSession {
			a.clearSessionCookie(w)
			next := r.URL.Path
			if r.Method == http.MethodGet && r.URL.RawQuery != "" {
				next += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		// Its error pages keep the navigation.
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)), s)
	}
}

type sessionKey struct{}

// sessionOf is the session signedIn found for r, or nil.
func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

// inEnv is signedIn for a page of env.
func (a *App) inEnv(env portal.Environment, h func(http.ResponseWriter, *http.Request, envRequest)) http.HandlerFunc {
	return a.signedIn(func(w http.ResponseWriter, r *http.Request, s *session) {
		h(w, r, envRequest{session: s, env: env})
	})
}

// root sends a visitor to their sandbox, or to sign in.
func (a *App) root(w http.ResponseWriter, r *http.Request) {
	if _, err := a.currentSession(r); err == nil {
		http.Redirect(w, r, "/sandbox/", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}
