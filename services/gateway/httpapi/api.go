// Package httpapi is the public HTTP/JSON API under /v1. Operations are
// declared with huma, so the OpenAPI 3.1 document served at
// /v1/openapi.json is generated from the very types the handlers use.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/esimplatform/esim/libs/coalesce"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/services/gateway"
)

// BasePath is the versioned base of every public endpoint.
const BasePath = "/v1"

// Deps are what the API needs from the rest of the gateway.
type Deps struct {
	Accounts  gateway.Accounts
	Catalogue gateway.Catalogue
	Limiter   gateway.RateLimiter
	// DefaultRateLimit applies to accounts without a limit of their own.
	DefaultRateLimit int
	Log              *slog.Logger
}

// New returns the public API handler; it serves its own OpenAPI document.
func New(d Deps) http.Handler {
	mux := http.NewServeMux()
	api := humago.NewWithPrefix(mux, BasePath, config())
	a := &handlers{Deps: d, api: api}
	api.UseMiddleware(a.authenticateAndLimit, a.rejectAmbiguousQuery)
	a.registerPlans(api)
	a.registerOpenAPI(api)
	// Anything else, a wrong method on a known path included, is an
	// unrecognised request, answered in the API's own error shape.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, withMessage(gateway.ErrNotFound, fmt.Sprintf("Unrecognized request: %s %s. The endpoints are listed in %s/openapi.json.", r.Method, r.URL.Path, BasePath)))
	})
	return mux
}

const securityScheme = "apiKey"

var bearerAuth = []map[string][]string{{securityScheme: {}}}

func config() huma.Config {
	c := huma.DefaultConfig("eSIM Ordering API", "1.0.0")
	c.Info.Description = "Buy travel eSIMs from a prepaid balance. Every request carries `Authorization: Bearer <API_KEY>`; the key decides the environment (sandbox or live)."
	c.Servers = []*huma.Server{{URL: BasePath}}
	// No $schema links in bodies, no docs or schema routes: the contract is
	// exactly the endpoints below plus the document itself.
	c.CreateHooks = nil
	c.DocsPath = ""
	c.SchemasPath = ""
	// The document is served by an operation of its own (see openapi.go) so
	// that it lists itself: the contract names every endpoint there is.
	c.OpenAPIPath = ""
	// A misspelt filter (?countyr=JP) would otherwise silently list all.
	c.RejectUnknownQueryParameters = true
	// JSON under its media type only: huma's extra "json" key would answer
	// "Accept: json" with "Content-Type: json".
	c.Formats = map[string]huma.Format{"application/json": huma.DefaultJSONFormat}
	// The API sends empty lists as [], never null; the schemas say so.
	huma.DefaultArrayNullable = false
	c.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securityScheme: {Type: "http", Scheme: "bearer", Description: "API key: sk_sandbox_... or sk_live_..."},
	}
	c.OnAddOperation = append(c.OnAddOperation, documentResponses)
	return c
}

// documentResponses declares the headers each response carries, and drops
// the 422 huma documents for operations with path parameters: the API
// answers every invalid input with 400 (see codeFor).
func documentResponses(_ *huma.OpenAPI, op *huma.Operation) {
	delete(op.Responses, "422")
	str := &huma.Schema{Type: huma.TypeString}
	integer := &huma.Schema{Type: huma.TypeInteger}
	for status, resp := range op.Responses {
		if resp.Headers == nil {
			resp.Headers = map[string]*huma.Param{}
		}
		resp.Headers["Request-Id"] = &huma.Param{Description: "Unique id of this request.", Schema: str}
		// A request whose key is not known has no allowance to report.
		if len(op.Security) == 0 || status == "401" {
			continue
		}
		resp.Headers["RateLimit-Limit"] = &huma.Param{Description: "Requests allowed per minute for this key.", Schema: integer}
		resp.Headers["RateLimit-Remaining"] = &huma.Param{Description: "Requests left in the current window.", Schema: integer}
		resp.Headers["RateLimit-Reset"] = &huma.Param{Description: "Seconds until the full allowance is back.", Schema: integer}
		if status == "429" {
			resp.Headers["Retry-After"] = &huma.Param{Description: "Seconds to wait: 60.", Schema: integer}
		}
	}
}

type handlers struct {
	Deps
	api huma.API
}

type principalKey struct{}

func principalFrom(ctx context.Context) gateway.Principal {
	p, _ := ctx.Value(principalKey{}).(gateway.Principal)
	return p
}

// retryAfter is the spec's fixed back-off for rate_limited.
const retryAfter = "60"

// UnmatchedRoute names, in metrics and traces, requests that matched no
// route: their paths are whatever a caller typed.
func UnmatchedRoute(*http.Request) string { return "unmatched" }

// authenticateAndLimit names the request's route (for its metrics and span), then,
// for every operation that declares bearer security, resolves the key,
// charges the request to the key's rate limit and sets the RateLimit-*
// headers.
func (a *handlers) authenticateAndLimit(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	httpserver.SetRoute(ctx.Context(), BasePath+op.Path)
	if len(op.Security) == 0 {
		next(ctx)
		return
	}
	scheme, secret, _ := strings.Cut(ctx.Header("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		secret = ""
	}
	p, err := a.Accounts.Authenticate(ctx.Context(), strings.TrimSpace(secret))
	if err != nil {
		// Only a refused key is a challenge; an accounts outage is ours.
		if errors.Is(err, gateway.ErrUnauthorized) {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="esim"`)
		}
		a.fail(ctx, err)
		return
	}

	limit := p.RateLimitPerMinute
	if limit <= 0 {
		limit = a.DefaultRateLimit
	}
	d, err := a.Limiter.Allow(ctx.Context(), p.KeyID, limit)
	if err != nil {
		a.fail(ctx, err)
		return
	}
	ctx.SetHeader("RateLimit-Limit", strconv.Itoa(d.Limit))
	ctx.SetHeader("RateLimit-Remaining", strconv.Itoa(d.Remaining))
	ctx.SetHeader("RateLimit-Reset", strconv.Itoa(int((d.ResetAfter+time.Second-1)/time.Second)))
	if !d.Allowed {
		ctx.SetHeader("Retry-After", retryAfter)
		a.fail(ctx, gateway.ErrRateLimited)
		return
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// rejectAmbiguousQuery refuses a query parameter given twice, given
// without a value, or not URL-encoded. Parsed leniently, ?limit=1&limit=200
// would take the first and ?limit= the default, and net/url drops a pair it
// cannot decode (?country=%zz) without a word: each time the partner would
// get a page they did not ask for.
func (a *handlers) rejectAmbiguousQuery(ctx huma.Context, next func(huma.Context)) {
	u := ctx.URL()
	if u.RawQuery == "" {
		next(ctx)
		return
	}
	verr := &gateway.ValidationError{}
	bad := func(name, reason string) {
		verr.Fields = append(verr.Fields, gateway.FieldError{Field: name, Reason: reason})
	}
	seen := map[string]int{}
	for pair := range strings.SplitSeq(u.RawQuery, "&") {
		if pair == "" {
			continue // a stray "&" says nothing
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, nameErr := url.QueryUnescape(rawName)
		value, valueErr := url.QueryUnescape(rawValue)
		switch {
		case nameErr != nil || strings.Contains(rawName, ";"):
			bad(rawName, "not a URL-encoded parameter name")
			continue
		case valueErr != nil || strings.Contains(rawValue, ";"):
			bad(name, "not a URL-encoded value")
		case value == "":
			bad(name, "given without a value")
		}
		if seen[name]++; seen[name] == 2 {
			bad(name, "given more than once")
		}
	}
	if len(verr.Fields) == 0 {
		next(ctx)
		return
	}
	// The answer follows the parameters' names, not the order they came in.
	slices.SortStableFunc(verr.Fields, func(a, b gateway.FieldError) int { return strings.Compare(a.Field, b.Field) })
	a.fail(ctx, verr)
}

// fail answers a middleware's error, as problem does a handler's.
func (a *handlers) fail(ctx huma.Context, err error) {
	a.logInternal(ctx.Context(), err)
	e := fromDomain(ctx.Context(), err)
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(e.status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(e)
}

// problem turns a use-case error into the response error, logging the ones
// that are our fault.
func (a *handlers) problem(ctx context.Context, err error) error {
	a.logInternal(ctx, err)
	return fromDomain(ctx, err)
}

func (a *handlers) logInternal(ctx context.Context, err error) {
	for _, e := range publicErrors {
		if errors.Is(err, e.err) {
			return
		}
	}
	if ctx.Err() != nil {
		// The caller went away; nothing failed on our side.
		a.Log.InfoContext(ctx, "request abandoned by the caller", "err", err)
		return
	}
	// A panic in a coalesced backend call comes back as an error; its stack
	// is the only place that says where it happened.
	var panicked *coalesce.PanicError
	if errors.As(err, &panicked) {
		a.Log.ErrorContext(ctx, "request failed", "err", err, "stack", string(panicked.Stack))
		return
	}
	a.Log.ErrorContext(ctx, "request failed", "err", err)
}
