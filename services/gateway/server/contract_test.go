package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/gateway/httpapi"
)

// documentedHeaders is the part of the OpenAPI document that names the
// headers of each operation's answers, by path, method and status.
type documentedHeaders struct {
	Paths map[string]map[string]struct {
		Responses map[string]struct {
			Headers map[string]json.RawMessage `json:"headers"`
		} `json:"responses"`
	} `json:"paths"`
}

// detailFields lists the distinct fields an error's details name, sorted.
func detailFields(e errorJSON) []string {
	var fields []string
	for _, d := range e.Error.Details {
		if d.Reason == "" {
			continue
		}
		if !slices.Contains(fields, d.Field) {
			fields = append(fields, d.Field)
		}
	}
	slices.Sort(fields)
	return fields
}

// DESIGN section 3: details name "each offending field". A partner who sent
// several bad parameters must learn of all of them from one answer,
// whichever kind of fault each has: unknown, repeated, empty, not
// URL-encoded, or out of range.
func TestEveryBadQueryParameterIsNamedAtOnce(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	plan := "/v1/plans/" + p.firstPlanID(key, "limit=1")

	for _, tc := range []struct {
		path   string
		fields []string
	}{
		{"/v1/plans?countyr=JP&limit=500", []string{"countyr", "limit"}},
		{"/v1/plans?limit=&page=0", []string{"limit", "page"}},
		{"/v1/plans?type=bundle&page=1&page=2", []string{"page", "type"}},
		{"/v1/plans?country=%zz&limit=500&zz=1", []string{"country", "limit", "zz"}},
		{"/v1/plans?limit=1;page=2&type=bundle", []string{"limit", "type"}},
		{"/v1/plans?country&limit=500&limit=1&type=%zz", []string{"country", "limit", "type"}},
		{"/v1/plans?limit=%2B1&limit=2&page=0&page=x", []string{"limit", "page"}},
		{"/v1/plans?country=ZZZ&country=JP&type=x", []string{"country", "type"}},
		{plan + "?zz=1&yy=", []string{"yy", "zz"}},
		{"/v1/openapi.json?a=1&b=", []string{"a", "b"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			e := p.expectError(p.get(tc.path, bearer(key)), http.StatusBadRequest, "invalid_request")
			// Once each: a second complaint about a parameter given twice
			// or not encoded would be about a value the partner never meant.
			if got := detailFields(e); !slices.Equal(got, tc.fields) || len(e.Error.Details) != len(tc.fields) {
				t.Fatalf("details name %v, want %v once each: %+v", got, tc.fields, e.Error.Details)
			}
			for _, f := range tc.fields {
				if !strings.Contains(e.Error.Message, f+": ") {
					t.Errorf("message %q does not name %s", e.Error.Message, f)
				}
			}
		})
	}
}

// Each operation the document lists refuses a parameter it does not declare,
// naming it once, however often it was given. The document is the list, so
// an operation added later without the check fails here.
func TestEveryOperationRefusesUnknownQueryParameters(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	planID := p.firstPlanID(key, "limit=1")
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(p.spec, &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		if _, get := ops["get"]; get {
			if _, head := ops["head"]; !head {
				t.Errorf("%s: GET without its HEAD", path)
			}
		}
		path = "/v1" + strings.ReplaceAll(path, "{id}", planID)
		for method := range ops {
			method = strings.ToUpper(method)
			switch method {
			case http.MethodGet, http.MethodPost:
				req, _ := http.NewRequest(method, p.gateway+path+"?countyr=JP&countyr=FR", strings.NewReader(`{}`))
				req.Header.Set("Authorization", bearer(key))
				e := p.expectError(p.send(req), http.StatusBadRequest, "invalid_request")
				named := 0
				for _, d := range e.Error.Details {
					if d.Field == "countyr" {
						named++
					}
				}
				if named != 1 {
					t.Errorf("%s %s: details %+v, want countyr named once", method, path, e.Error.Details)
				}
			case http.MethodHead:
				req, _ := http.NewRequest(http.MethodHead, p.gateway+path+"?countyr=JP", nil)
				req.Header.Set("Authorization", bearer(key))
				if r := p.send(req); r.status != http.StatusBadRequest {
					t.Errorf("HEAD %s?countyr=JP: %d, want 400", path, r.status)
				}
			default:
				t.Errorf("%s %s: a method this test does not probe", method, path)
			}
		}
	}
}

// The document describes every header of the contract that an answer
// carries, under that answer's status (spec section 9: the contract "matches
// the implementation").
func TestResponseHeadersAreDocumented(t *testing.T) {
	p := start(t, options{defaultRateLimit: 8})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	var doc documentedHeaders
	if err := json.Unmarshal(p.spec, &doc); err != nil {
		t.Fatal(err)
	}
	plan := "/v1/plans/" + p.firstPlanID(key, "limit=1")

	type call struct{ route, path, auth string }
	calls := []call{
		{"/plans", "/v1/plans?limit=1", bearer(key)},
		{"/plans", "/v1/plans?limit=0", bearer(key)},
		{"/plans", "/v1/plans", ""},
		{"/plans", "/v1/plans", "Bearer sk_sandbox_unknown"},
		{"/plans/{id}", plan, bearer(key)},
		{"/plans/{id}", "/v1/plans/nope", bearer(key)},
		{"/plans/{id}", plan, ""},
		{"/openapi.json", "/v1/openapi.json", ""},
		{"/openapi.json", "/v1/openapi.json?x=1", ""},
	}
	// Past the key's allowance of 8: 429s.
	for range 8 {
		calls = append(calls, call{"/plans/{id}", plan, bearer(key)})
	}
	statuses := map[int]bool{}
	for _, c := range calls {
		r := p.get(c.path, c.auth)
		statuses[r.status] = true
		responses := doc.Paths[c.route]["get"].Responses
		documented, ok := responses[strconv.Itoa(r.status)]
		if !ok {
			documented = responses["default"]
		}
		for _, h := range []string{"Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "WWW-Authenticate"} {
			if r.header.Get(h) == "" {
				continue
			}
			if _, ok := documented.Headers[h]; !ok {
				t.Errorf("GET %s -> %d carries %s, which the document does not list for it", c.path, r.status, h)
			}
		}
	}
	for _, want := range []int{200, 400, 401, 404, 429} {
		if !statuses[want] {
			t.Errorf("no call answered %d", want)
		}
	}
}

// Spec section 5: "a missing, wrong or deactivated key gives unauthorized
// (HTTP 401)". A header with bytes no key has is a wrong key, not a fault of
// ours to retry.
func TestAKeyThatIsNotUTF8IsUnauthorized(t *testing.T) {
	p := start(t, options{})
	for _, auth := range []string{"Bearer sk_sandbox_\xff\xfe", "Bearer \xc3", "Bearer sk_live_abc\x80def"} {
		r := p.get("/v1/plans?limit=1", auth)
		p.expectError(r, http.StatusUnauthorized, "unauthorized")
		if r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%q: 401 without WWW-Authenticate", auth)
		}
	}
}

// Two Authorization headers are refused whatever their order, even when
// one holds a valid key: whichever came first must not decide who pays.
func TestTwoAuthorizationHeadersAreUnauthorized(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	for _, pair := range [][2]string{{bearer(key), "Bearer sk_sandbox_nonsense"}, {"Bearer sk_sandbox_nonsense", bearer(key)}, {bearer(key), bearer(key)}} {
		req, _ := http.NewRequest(http.MethodGet, p.gateway+"/v1/plans?limit=1", nil)
		req.Header.Add("Authorization", pair[0])
		req.Header.Add("Authorization", pair[1])
		r := p.send(req)
		p.expectError(r, http.StatusUnauthorized, "unauthorized")
		if r.header.Get("WWW-Authenticate") == "" || r.header.Get("RateLimit-Remaining") != "" {
			t.Errorf("%q: WWW-Authenticate %q, RateLimit-Remaining %q", pair, r.header.Get("WWW-Authenticate"), r.header.Get("RateLimit-Remaining"))
		}

		// Nor do they draw on the key's allowance on a path that does not
		// exist.
		req, _ = http.NewRequest(http.MethodGet, p.gateway+"/v1/nope", nil)
		req.Header.Add("Authorization", pair[0])
		req.Header.Add("Authorization", pair[1])
		r = p.send(req)
		p.expectError(r, http.StatusNotFound, "not_found")
		if v := r.header.Get("RateLimit-Remaining"); v != "" {
			t.Errorf("%q on /v1/nope: RateLimit-Remaining %q", pair, v)
		}
	}
	// The key itself still works, and was not charged above: the default
	// allowance less this one request.
	r := p.get("/v1/plans?limit=1", bearer(key))
	limit, _ := strconv.Atoi(r.header.Get("RateLimit-Limit"))
	if r.status != http.StatusOK || limit == 0 || r.header.Get("RateLimit-Remaining") != strconv.Itoa(limit-1) {
		t.Errorf("the key alone: %d, RateLimit-Limit %q Remaining %q", r.status, r.header.Get("RateLimit-Limit"), r.header.Get("RateLimit-Remaining"))
	}
}

// README: every answer to a known key carries RateLimit-*. A request to a
// path that does not exist is still a request: a known key's draws on its
// allowance, so none can be spent outside the limit. Without a key, or with
// a wrong one, the path is what is wrong: 404, no challenge.
func TestUnrecognizedRequestsOfAKnownKeyDrawOnItsAllowance(t *testing.T) {
	p := start(t, options{defaultRateLimit: 3})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	for i, path := range []string{"/v1/nope", "/v2/plans"} {
		r := p.get(path, bearer(key))
		p.expectError(r, http.StatusNotFound, "not_found")
		if got, want := r.header.Get("RateLimit-Remaining"), strconv.Itoa(2-i); got != want || r.header.Get("RateLimit-Limit") != "3" || r.header.Get("RateLimit-Reset") == "" {
			t.Fatalf("%s: RateLimit-Limit %q Remaining %q Reset %q, want 3, %s and a reset", path, r.header.Get("RateLimit-Limit"), got, r.header.Get("RateLimit-Reset"), want)
		}
	}
	if r := p.get("/v1/plans?limit=1", bearer(key)); r.status != http.StatusOK || r.header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("third request: %d, Remaining %q", r.status, r.header.Get("RateLimit-Remaining"))
	}
	r := p.get("/v1/nope", bearer(key))
	p.expectError(r, http.StatusTooManyRequests, "rate_limited")
	if r.header.Get("Retry-After") != "60" || r.header.Get("RateLimit-Remaining") != "0" {
		t.Errorf("over the limit: Retry-After %q Remaining %q", r.header.Get("Retry-After"), r.header.Get("RateLimit-Remaining"))
	}

	for _, auth := range []string{"", "Bearer sk_sandbox_nonsense", "Basic dXNlcjpwdw=="} {
		r := p.get("/v1/nope", auth)
		p.expectError(r, http.StatusNotFound, "not_found")
		for _, h := range []string{"WWW-Authenticate", "RateLimit-Limit", "RateLimit-Remaining", "Retry-After"} {
			if v := r.header.Get(h); v != "" {
				t.Errorf("%q: %s %q on a 404 without a known key", auth, h, v)
			}
		}
	}
}

// "GET * HTTP/1.1" names no resource: the API's 404 in its own shape, not
// ServeMux's bare 400.
func TestAsteriskRequestIsUnrecognized(t *testing.T) {
	p := start(t, options{})
	status, header, body := httpservertest.RawExchange(t, strings.TrimPrefix(p.gateway, "http://"), "GET * HTTP/1.1\r\nHost: gateway\r\n\r\n")
	e := p.expectError(response{status: status, header: header, body: []byte(body)}, http.StatusNotFound, "not_found")
	if header.Get("Request-Id") == "" || !strings.Contains(e.Error.Message, "GET *") {
		t.Errorf("Request-Id %q, message %q", header.Get("Request-Id"), e.Error.Message)
	}
}

// A path that is not in its clean form answers the API's 404, not
// ServeMux's redirect with an HTML page, which a client could follow.
func TestUncleanPathsAreUnrecognized(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// An encoded slash is named as sent: decoded, "/v1/plans%2F<id>" would
	// read as a path that exists.
	encodedSlash := "/v1/plans%2F" + p.firstPlanID(key, "")
	for _, path := range []string{"/v1//plans", "/v1/./plans", "/v1/plans/../plans", "//v1/plans", "/v1/openapi.json/..", encodedSlash} {
		req, _ := http.NewRequest(http.MethodGet, p.gateway+path, nil)
		req.Header.Set("Authorization", bearer(key))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := response{status: resp.StatusCode, header: resp.Header, body: body}
		p.validate(req, r)
		e := p.expectError(r, http.StatusNotFound, "not_found")
		if !strings.Contains(e.Error.Message, path) {
			t.Errorf("%s: message %q does not name the path", path, e.Error.Message)
		}
	}
}

// DESIGN section 3: bodies over 1 MiB are rejected, on every endpoint, even
// where none is read. The key is still judged first; a body at the limit
// is not refused (and, on a GET, not read).
func TestBodiesOverOneMiBAreInvalid(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	planID := p.firstPlanID(key, "")
	withBody := func(path, auth string, size int) response {
		req, _ := http.NewRequest(http.MethodGet, p.gateway+path, bytes.NewReader(make([]byte, size)))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return p.send(req)
	}
	for _, path := range []string{"/v1/plans", "/v1/plans/" + planID, "/v1/openapi.json"} {
		e := p.expectError(withBody(path, bearer(key), httpapi.MaxBodyBytes+1), http.StatusBadRequest, "invalid_request")
		if fields := detailFields(e); !slices.Equal(fields, []string{"body"}) || !strings.Contains(e.Error.Details[0].Reason, "1048577 bytes") {
			t.Errorf("%s with 1 MiB + 1 byte: details %+v, want the body named with its size", path, e.Error.Details)
		}
		if r := withBody(path, bearer(key), httpapi.MaxBodyBytes); r.status != http.StatusOK {
			t.Errorf("%s with 1 MiB: %d %s, want 200", path, r.status, r.body)
		}
	}
	p.expectError(withBody("/v1/plans", "", httpapi.MaxBodyBytes+1), http.StatusUnauthorized, "unauthorized")

	// Sent chunked, with no length to judge, a body is read up to the cap.
	chunked := func(size int) response {
		req, _ := http.NewRequest(http.MethodGet, p.gateway+"/v1/plans/"+planID, io.MultiReader(bytes.NewReader(make([]byte, size))))
		req.Header.Set("Authorization", bearer(key))
		r := p.send(req)
		if req.ContentLength != 0 || req.TransferEncoding != nil && req.TransferEncoding[0] != "chunked" {
			t.Fatalf("the request was not sent chunked: length %d, %v", req.ContentLength, req.TransferEncoding)
		}
		return r
	}
	e := p.expectError(chunked(httpapi.MaxBodyBytes+1), http.StatusBadRequest, "invalid_request")
	if fields := detailFields(e); !slices.Equal(fields, []string{"body"}) || !strings.Contains(e.Error.Details[0].Reason, "sent chunked") {
		t.Errorf("a chunked body of 1 MiB + 1 byte: details %+v, want the body named", e.Error.Details)
	}
	if r := chunked(httpapi.MaxBodyBytes); r.status != http.StatusOK {
		t.Errorf("a chunked body of 1 MiB: %d %s, want 200", r.status, r.body)
	}
}
