// Package httpapi is the public HTTP/JSON API under /v1. Operations are
// declared with huma, so the OpenAPI 3.1 document served at
// /v1/openapi.json is generated from the very types the handlers use.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/esimplatform/esim/libs/coalesce"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/proto/partnerapi"
	"github.com/esimplatform/esim/services/gateway"
)

// basePath is the versioned base of every public endpoint.
const basePath = "/v1"

// Deps are what the API needs from the rest of the gateway.
type Deps struct {
	// Gate admits every request to an operation that needs a key.
	Gate      gateway.Gate
	Catalogue gateway.Catalogue
	Orders    Orders
	Wallet    gateway.Wallet
	Events    gateway.Events
	Log       *slog.Logger
}

// New returns the public API handler; it serves its own OpenAPI document.
func New(d Deps) http.Handler {
	mux := http.NewServeMux()
	api := humago.NewWithPrefix(mux, basePath, config())
	a := &handlers{Deps: d, api: api}
	api.UseMiddleware(a.authenticateAndLimit)
	registerAmount(api)
	a.registerPlans(api)
	a.registerOrders(api)
	a.registerEsims(api)
	a.registerEvents(api)
	a.registerOpenAPI(api)
	declareHead(api.OpenAPI())
	declareWebhooks(api.OpenAPI())
	mux.HandleFunc("GET "+QRPath+"{file}", a.qrCode)
	mux.HandleFunc("/", a.unrecognized)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// This ServeMux too would answer an unclean path with a redirect
		// and a page, and "*" with a bare 400 (see httpserver.Unroutable).
		if httpserver.Unroutable(r) {
			a.unrecognized(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// securityScheme is named for what it is, HTTP bearer authentication:
// OpenAPI's own "apiKey" type is another scheme, and generated SDKs name
// their credential setting after this.
const securityScheme = "bearerAuth"

var bearerAuth = []map[string][]string{{securityScheme: {}}}

func config() huma.Config {
	c := huma.DefaultConfig("eSIM Ordering API", "1.0.0")
	c.Info.Description = "Buy travel eSIMs from a prepaid balance. Every request carries `Authorization: Bearer <API_KEY>`; the key decides the environment (sandbox or live)."
	c.Servers = []*huma.Server{{URL: basePath}}
	// No $schema links in bodies, no docs or schema routes: the contract is
	// exactly the endpoints below plus the document itself.
	c.CreateHooks = nil
	c.DocsPath = ""
	c.SchemasPath = ""
	// The document is served by an operation of its own (see openapi.go) so
	// that it lists itself: the contract names every endpoint there is.
	c.OpenAPIPath = ""
	// Unknown query parameters are StrictQuery's to refuse: huma's own
	// check answers before it validates the values, naming one kind of
	// fault per attempt.
	c.RejectUnknownQueryParameters = false
	// JSON under its media type only: huma's extra "json" key would answer
	// "Accept: json" with "Content-Type: json". Written as partnerapi
	// writes a webhook's data (huma's default writes the same), so that an
	// order here and in a webhook are the same bytes by construction.
	c.Formats = map[string]huma.Format{"application/json": {Marshal: partnerapi.Encode, Unmarshal: json.Unmarshal}}
	c.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securityScheme: {Type: "http", Scheme: "bearer", BearerFormat: "sk_sandbox_... or sk_live_...", Description: "API key: sk_sandbox_... or sk_live_..."},
	}
	c.Info.Contact = &huma.Contact{Name: "Partner support, through the partner portal; quote the request_id of the answer in question"}
	c.Info.License = license
	c.Tags = tags
	c.OnAddOperation = append(c.OnAddOperation, documentResponses, pagingBounds, orderBounds, topUpBounds, documentReplays, documentIDs, readsBodies)
	return c
}

// tags group the operations in the document, in the order a partner meets
// them; each operation names one (TestEveryOperationIsTaggedAndDescribed).
var tags = []*huma.Tag{
	{Name: "Plans", Description: "The catalogue, priced in the account's currency."},
	{Name: "Orders", Description: "Buying eSIMs from the prepaid balance, and the orders made."},
	{Name: "eSIMs", Description: "The profiles orders issued, with what a traveller needs to install them, their lifecycle and usage, top-ups, and the sandbox's simulation of a device and the network."},
	{Name: "Balance", Description: "The prepaid balance orders are debited from."},
	{Name: "Events", Description: "Webhook events and every attempt to deliver them."},
	{Name: "Webhooks", Description: "What the platform sends to your endpoint: one signed POST per event (Standard Webhooks)."},
	{Name: "Meta", Description: "This document."},
}

// responseDescriptions say, for each error status, which error code comes
// with it and when: huma's defaults are the bare reason phrases.
var responseDescriptions = map[string]string{
	"400": "`invalid_request`: a query parameter is unknown, given twice, given without a value, not URL-encoded or out of range; a body field is missing, unknown, given twice, of the wrong type (a whole number written with a decimal point or exponent included), not valid UTF-8 or out of range; the body is not JSON or over 1 MiB; or the Idempotency-Key is malformed or was used with a different request. `details` names each one.",
	"401": "`unauthorized`: the API key is missing, malformed, unknown or revoked, or two Authorization headers were sent.",
	"402": "`insufficient_funds`: the balance does not cover the order or top-up; nothing was charged or kept. Top up, then retry with the same Idempotency-Key.",
	"404": "`not_found`: no such resource; a retired plan, an unknown id and a malformed id alike.",
	"502": "`provider_error`: the provider failed and the order or top-up was refunded in full; a replay of it answers the same. Buy again with a new Idempotency-Key.",
	"429": "`rate_limited`: the key's allowance is spent. Retry after the seconds in `Retry-After`.",
	"500": "`internal_error`: our fault; the `request_id` helps us find it.",
}

// documentResponses declares the headers each response carries, and drops
// the 422 huma documents for operations with path parameters: the API
// answers every invalid input with 400 (see codeFor).
func documentResponses(_ *huma.OpenAPI, op *huma.Operation) {
	delete(op.Responses, "422")
	str := &huma.Schema{Type: huma.TypeString}
	integer := &huma.Schema{Type: huma.TypeInteger}
	for status, resp := range op.Responses {
		if d, ok := responseDescriptions[status]; ok {
			resp.Description = d
		}
		if resp.Headers == nil {
			resp.Headers = map[string]*huma.Param{}
		}
		// OpenAPI: a response header named Content-Type "SHALL be
		// ignored"; the media type under content says it.
		delete(resp.Headers, "Content-Type")
		resp.Headers["Request-Id"] = &huma.Param{Description: "Unique id of this request.", Schema: str, Required: true}
		if len(op.Security) == 0 {
			continue
		}
		// A request whose key is not known has no allowance to report.
		if status == "401" {
			resp.Headers["WWW-Authenticate"] = &huma.Param{Description: `The challenge: Bearer realm="esim".`, Schema: str}
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

// declareHead documents HEAD beside every GET: ServeMux answers it through
// the GET handler, as HTTP asks of every server (RFC 9110, section 9.1),
// with the same status and headers and no body, so the contract lists it.
// It draws on the key's allowance as the GET does.
func declareHead(doc *huma.OpenAPI) {
	for _, item := range doc.Paths {
		if item.Get == nil || item.Head != nil {
			continue
		}
		head := *item.Get
		head.Method = http.MethodHead
		head.OperationID = "head-" + strings.TrimPrefix(head.OperationID, "get-")
		head.Summary = "Headers of: " + item.Get.Summary
		head.Description = "The GET's status and headers, without its body."
		head.Responses = make(map[string]*huma.Response, len(item.Get.Responses))
		for status, resp := range item.Get.Responses {
			bodiless := *resp
			bodiless.Content = nil
			head.Responses[status] = &bodiless
		}
		item.Head = &head
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

// authenticateAndLimit names the request's route (for its metrics and
// span), then, for every operation that declares bearer security, admits
// the request.
func (a *handlers) authenticateAndLimit(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	httpserver.SetRoute(ctx.Context(), basePath+op.Path)
	r, _ := humago.Unwrap(ctx)
	if len(op.Security) > 0 {
		p, err := a.admit(ctx.Context(), authorization(r.Header), ctx.SetHeader)
		if err != nil {
			a.fail(ctx, err)
			return
		}
		if p.Environment != gateway.Sandbox && op.Metadata[sandboxOnly] == true {
			a.fail(ctx, withMessage(gateway.ErrNotFound, fmt.Sprintf("%s %s is for sandbox keys only; this key is live.", r.Method, r.URL.EscapedPath())))
			return
		}
		ctx = huma.WithValue(ctx, principalKey{}, p)
	}
	// A body over the cap is refused on every endpoint (DESIGN section 3),
	// not only where one is read. An operation that reads its body finds
	// the cap as it reads; for one that takes none, the announced length
	// is judged, or, for a body sent chunked, what arrives up to the cap.
	if reason := overCap(r, op.RequestBody == nil); reason != "" {
		a.fail(ctx, gateway.Invalid("body", reason))
		return
	}
	// A malformed id names nothing, as an unknown one: not_found, before
	// the body is judged (a GET's handler says so itself).
	if op.RequestBody != nil && slices.ContainsFunc(op.Parameters, func(p *huma.Param) bool { return p.In == "path" && p.Name == "id" }) {
		if _, ok := canonicalID(ctx.Param("id")); !ok {
			a.fail(ctx, withMessage(gateway.ErrNotFound, fmt.Sprintf("Nothing at %s: %q is not an id (a UUID).", r.URL.EscapedPath(), ctx.Param("id"))))
			return
		}
	}
	if op.RequestBody != nil && !a.takeBody(ctx) {
		return
	}
	next(ctx)
}

// overCap says why r's body is over MaxBodyBytes, or "" when it is not.
// drain allows reading a body of unknown length (sent chunked) to find
// out, for an operation that takes no body.
func overCap(r *http.Request, drain bool) string {
	switch {
	case r.ContentLength > MaxBodyBytes:
		return fmt.Sprintf("%d bytes, over the limit of %d (1 MiB)", r.ContentLength, MaxBodyBytes)
	case r.ContentLength >= 0 || !drain:
		return ""
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r.Body, MaxBodyBytes+1))
	var tooLarge *http.MaxBytesError
	if n > MaxBodyBytes || errors.As(err, &tooLarge) {
		return fmt.Sprintf("sent chunked, over the limit of %d bytes (1 MiB)", MaxBodyBytes)
	}
	return ""
}

// MaxBodyBytes caps a request body (DESIGN section 3: 1 MiB). It is also
// the cap huma applies to a body it reads for an operation that sets none
// (huma.Operation.MaxBodyBytes).
const MaxBodyBytes = 1 << 20

// authorization is the request's Authorization header when it has exactly
// one. Two are not a key but a contradiction, refused like a malformed one
// (""): taking the first, as Header.Get does, would let whichever one a
// proxy put first decide who pays.
func authorization(h http.Header) string {
	if v := h.Values("Authorization"); len(v) == 1 {
		return v[0]
	}
	return ""
}

// admit resolves the key in an Authorization header and charges the
// request to the key's rate limit, setting the RateLimit-* headers (and
// the challenge or Retry-After of a refusal) through setHeader.
func (a *handlers) admit(ctx context.Context, authorization string, setHeader func(name, value string)) (gateway.Principal, error) {
	scheme, secret, _ := strings.Cut(authorization, " ")
	secret = strings.TrimSpace(secret)
	// What follows the scheme is the key's to judge: Authenticate refuses,
	// without a lookup, anything that cannot be one (bytes that are not
	// UTF-8 included, which a protobuf string could not carry).
	if !strings.EqualFold(scheme, "Bearer") {
		secret = ""
	}
	p, d, err := a.Gate.Admit(ctx, secret)
	switch {
	case errors.Is(err, gateway.ErrUnauthorized):
		setHeader("WWW-Authenticate", `Bearer realm="esim"`)
		return p, err
	case err != nil && !errors.Is(err, gateway.ErrRateLimited):
		// An accounts or limiter outage is ours: no challenge.
		return p, err
	}
	setHeader("RateLimit-Limit", strconv.Itoa(d.Limit))
	setHeader("RateLimit-Remaining", strconv.Itoa(d.Remaining))
	setHeader("RateLimit-Reset", strconv.Itoa(int((d.ResetAfter+time.Second-1)/time.Second)))
	if err != nil {
		setHeader("Retry-After", retryAfter)
	}
	return p, err
}

// unrecognized answers a request no operation matches, a wrong method on
// a known path included, in the API's own error shape. A known key's
// request still draws on its allowance and reports it, as every answer to
// a known key does, so a partner cannot spend requests outside the limit;
// without a key, or with a wrong one, the answer is the same 404, since the
// path is what is wrong.
func (a *handlers) unrecognized(w http.ResponseWriter, r *http.Request) {
	if auth := authorization(r.Header); auth != "" {
		// Into a header of its own: a wrong key's challenge is not sent.
		admitted := http.Header{}
		_, err := a.admit(r.Context(), auth, admitted.Set)
		if err == nil || errors.Is(err, gateway.ErrRateLimited) {
			maps.Copy(w.Header(), admitted)
			if err != nil {
				writeError(w, r, err)
				return
			}
		}
	}
	writeError(w, r, withMessage(gateway.ErrNotFound, fmt.Sprintf("Unrecognized request: %s %s. The endpoints are listed in %s/openapi.json.", r.Method, r.URL.EscapedPath(), basePath)))
}

// StrictQuery, embedded in the input of every operation, refuses a query
// parameter the operation does not declare, or one given twice, given
// without a value, or not URL-encoded. A misspelt filter (?countyr=JP)
// would otherwise silently list all; parsed leniently, ?limit=1&limit=200
// would take the first and ?limit= the default, and net/url drops a pair
// it cannot decode (?country=%zz) without a word: each time the partner
// would get a page they did not ask for. It is a huma resolver rather than
// a middleware so that its findings join huma's checks of the values, and
// one answer names every offending parameter. Exported because huma looks
// for resolvers in exported fields only.
type StrictQuery struct{}

func (StrictQuery) Resolve(ctx huma.Context) []error {
	u := ctx.URL()
	if u.RawQuery == "" {
		return nil
	}
	var errs []error
	bad := func(name, reason string) {
		errs = append(errs, queryFault{&huma.ErrorDetail{Location: "query." + name, Message: reason}})
	}
	seen := map[string]int{}
	valueFault := map[string]string{} // by declared parameter; "" when its value is fine
	for pair := range strings.SplitSeq(u.RawQuery, "&") {
		if pair == "" {
			continue // a stray "&" says nothing
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		switch {
		case err != nil || strings.Contains(rawName, ";"):
			bad(asSent(rawName), "not a URL-encoded parameter name")
			continue
		case name == "":
			// Named by what was sent, there being no name; said once.
			if seen[""]++; seen[""] == 1 {
				bad(asSent(pair), "a parameter without a name")
			}
			continue
		case !utf8.ValidString(name):
			bad(url.QueryEscape(name), "a parameter name that is not UTF-8 text")
			continue
		}
		param := queryParam(ctx.Operation(), name)
		if seen[name]++; param == nil {
			// Whatever its value, it is wrong once.
			if seen[name] == 1 {
				bad(name, "unknown query parameter")
			}
			continue
		}
		if _, judged := valueFault[name]; judged {
			continue
		}
		value, err := url.QueryUnescape(rawValue)
		switch {
		case err != nil || strings.Contains(rawValue, ";"):
			valueFault[name] = "not a URL-encoded value"
		case value == "":
			valueFault[name] = "given without a value"
		default:
			valueFault[name] = wholeNumberFault(param, value)
		}
	}
	// A parameter is named once: given twice, that is its fault, whatever
	// either value.
	for name, reason := range valueFault {
		if seen[name] > 1 {
			reason = "given more than once"
		}
		if reason != "" {
			bad(name, reason)
		}
	}
	// The answer follows the parameters' names, not the order they came in.
	slices.SortStableFunc(errs, func(a, b error) int {
		return strings.Compare(a.(queryFault).Location, b.(queryFault).Location)
	})
	return errs
}

// asSent is query text fit to name a field in an answer: as it came when
// it is UTF-8, URL-encoded otherwise, so that JSON does not turn its bytes
// into U+FFFD.
func asSent(raw string) string {
	if utf8.ValidString(raw) {
		return raw
	}
	return url.QueryEscape(raw)
}

// queryFault is StrictQuery's finding about a parameter. It stands alone
// in the answer (see newError): whatever else huma says about that
// parameter is about a value the partner did not mean, the first of two or
// the raw text of one that does not decode.
type queryFault struct{ *huma.ErrorDetail }

func (q queryFault) Unwrap() error { return q.ErrorDetail }

// queryParam is the query parameter op declares by that name, or nil.
func queryParam(op *huma.Operation, name string) *huma.Param {
	for _, p := range op.Parameters {
		if p.In == "query" && p.Name == name {
			return p
		}
	}
	return nil
}

// wholeNumberFault says what is wrong with an integer parameter's value
// written other than as plain digits ("+2", "0001", "1e3"), which strconv
// would read leniently or refuse as an "invalid integer", or out of its
// range; "" when it is fine, or when p is not an integer. huma checks the range too, but in words of
// its own ("expected number <= 100"): said here, every fault of the
// parameter reads the same, and huma's finding is dropped (newError).
func wholeNumberFault(p *huma.Param, value string) string {
	if p.Schema == nil || p.Schema.Type != huma.TypeInteger {
		return ""
	}
	want := "want a whole number"
	if p.Schema.Minimum != nil && p.Schema.Maximum != nil {
		want = fmt.Sprintf("want a whole number from %v to %v", *p.Schema.Minimum, *p.Schema.Maximum)
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return want + ", in digits alone (no sign, point or exponent)"
		}
	}
	if len(value) > 1 && value[0] == '0' {
		return want + ", without leading zeros"
	}
	// Nine digits or fewer fit any int; more are past every bound here.
	if len(value) > 9 {
		return want
	}
	n, _ := strconv.Atoi(value)
	if (p.Schema.Minimum != nil && float64(n) < *p.Schema.Minimum) || (p.Schema.Maximum != nil && float64(n) > *p.Schema.Maximum) {
		return want
	}
	return ""
}

// fail answers a middleware's error, as problem does a handler's.
func (a *handlers) fail(ctx huma.Context, err error) {
	a.logInternal(ctx.Context(), err)
	e := fromDomain(ctx.Context(), err)
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(e.status)
	writeJSON(ctx.BodyWriter(), e)
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
	if httpserver.CutByShutdown(ctx) {
		a.Log.WarnContext(ctx, "request cut short by the gateway's shutdown", "err", err)
		return
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
