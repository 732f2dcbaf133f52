// Package web serves the portal's pages: server-rendered HTML over the
// accounts, wallet, ordering and webhook services, plain CSS, and a
// little JavaScript for copy buttons only.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/esimplatform/esim/libs/httpserver"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/portal"
)

// MaxBodyBytes caps a request body: the portal's forms are a few fields.
const MaxBodyBytes = 64 << 10

// Deps is what the pages read and change.
type Deps struct {
	Accounts accountsv1.Accounts
	Wallet   walletv1.Wallet
	Ordering orderingv1.Ordering
	Webhook  webhookv1.Webhook
	// SignIns limits failed sign-ins; SignUps sign-ups and invite
	// acceptances.
	SignIns portal.SignInLimiter
	SignUps portal.SignUpLimiter
	// NewKeys holds a new API key's sealed secret until its page shows it.
	NewKeys portal.NewKeys
	// PublicAPIURL is the partner API's base, for curl examples; its
	// origin serves the QR images the order pages show.
	PublicAPIURL  string
	SecureCookies bool
	Log           *slog.Logger
}

// App is the portal's HTTP handler.
type App struct {
	Deps
	handler http.Handler
	csp     string
}

// New builds the routes.
func New(d Deps) (*App, error) {
	api, err := url.Parse(d.PublicAPIURL)
	if err != nil || api.Host == "" {
		return nil, fmt.Errorf("PUBLIC_API_URL %q: want an http(s) URL", d.PublicAPIURL)
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	a := &App{Deps: d}
	// QR images are <img>s of the eSIMs' qr_code_url, which the gateway
	// serves; nothing else comes from anywhere but here.
	a.csp = "default-src 'self'; img-src 'self' " + api.Scheme + "://" + api.Host + " data:; script-src 'self'; style-src 'self'; " +
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

	mux := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpserver.SetRoute(r.Context(), pattern)
			h(w, r)
		}))
	}
	handle("GET /static/", a.static)
	handle("GET /{$}", a.root)
	handle("GET /signup", a.signUpPage)
	handle("POST /signup", a.signUp)
	handle("GET /signin", a.signInPage)
	handle("POST /signin", a.signIn)
	handle("POST /signout", a.signedIn(a.signOut))
	handle("GET /settings/password", a.signedIn(a.passwordPage))
	handle("POST /settings/password", a.signedIn(a.changePassword))
	a.accessRoutes(handle)
	for _, env := range portal.Environments {
		e := "/" + string(env)
		handle("GET "+e+"/{$}", a.inEnv(env, a.overview))
		handle("GET "+e+"/keys", a.inEnv(env, a.keys))
		handle("POST "+e+"/keys", a.inEnv(env, a.createKey))
		handle("GET "+e+"/new-key/{id}", a.inEnv(env, a.keyCreated))
		handle("GET "+e+"/keys/{id}/revoke", a.inEnv(env, a.revokePage))
		handle("POST "+e+"/keys/{id}/revoke", a.inEnv(env, a.revokeKey))
		handle("GET "+e+"/webhooks", a.inEnv(env, a.webhooks))
		handle("POST "+e+"/webhooks", a.inEnv(env, a.setEndpoint))
		handle("POST "+e+"/webhooks/secret", a.inEnv(env, a.revealSecret))
		handle("POST "+e+"/webhooks/rotate", a.inEnv(env, a.rotateSecret))
		handle("POST "+e+"/webhooks/test", a.inEnv(env, a.sendTestEvent))
		handle("GET "+e+"/events", a.inEnv(env, a.events))
		handle("GET "+e+"/events/{id}", a.inEnv(env, a.event))
		handle("GET "+e+"/orders", a.inEnv(env, a.orders))
		handle("GET "+e+"/orders/{id}", a.inEnv(env, a.order))
		handle("GET "+e+"/esims", a.inEnv(env, a.esims))
		handle("GET "+e+"/esims/{id}", a.inEnv(env, a.esim))
		handle("GET "+e+"/balance", a.inEnv(env, a.balance))
		handle("GET "+e+"/search", a.inEnv(env, a.search))
	}
	// Free money exists in the sandbox only: live has no such route.
	handle("POST /sandbox/balance/topup", a.inEnv(portal.Sandbox, a.topUp))
	handle("/", func(w http.ResponseWriter, r *http.Request) {
		// A signed-in user's mistyped address keeps the navigation; a
		// session accounts cannot check now is no reason to fail a 404.
		if s, err := a.currentSession(r); err == nil {
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
		}
		a.notFound(w, r)
	})

	// Cross-site form posts are refused before any handler runs: the
	// session cookie is SameSite=Lax too, but this also covers same-site
	// pages on other origins.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Log.WarnContext(r.Context(), "refused a cross-origin request", "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		a.errorPage(w, r, http.StatusForbidden, "Forbidden", "This form was sent from another site, so it was refused.")
	}))
	a.handler = a.securityHeaders(cop.Handler(mux))
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// UnmatchedRoute names, in metrics and traces, requests that matched no
// route.
func UnmatchedRoute(*http.Request) string { return "unmatched" }

// AnswerPanic answers a request whose handler panicked with the plain 500
// page; the panic itself is logged by httpserver.
func (a *App) AnswerPanic(w http.ResponseWriter, r *http.Request) {
	a.errorPage(w, r, http.StatusInternalServerError, "Something went wrong", "")
}

func (a *App) securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", a.csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			// Pages show keys, secrets and balances: never kept by a
			// browser or proxy cache.
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// localPath is next when it is a path on this site, else the sandbox
// overview: a sign-in link must not send anyone elsewhere.
func localPath(next string) string {
	const fallback = "/sandbox/"
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return fallback
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return fallback
	}
	return next
}

var errNoSession = errors.New("no session")
