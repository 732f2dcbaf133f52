package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/esimplatform/esim/proto/limits"
	"github.com/esimplatform/esim/proto/partnerapi"
	"github.com/esimplatform/esim/services/gateway"
)

// The fuzz targets drive the real handler, huma, StrictQuery and the body
// vetting included, in process. Behind it stands backends, which records
// what reached it: at a million requests a target, the real services are
// out of the question, and what is judged here is what the HTTP layer
// lets through and how it refuses the rest.

const fuzzKey = "sk_sandbox_fuzz"

// backends answers every call a partner's request can make, and records
// the last one.
type backends struct {
	calls int
	order *gateway.NewOrder
	topUp *gateway.NewTopUp
	query any // the last list query: a PlanQuery, OrderQuery, EsimQuery or EventQuery
}

func (b *backends) Authenticate(_ context.Context, secret string) (gateway.Principal, error) {
	if secret == liveKey {
		return gateway.Principal{AccountID: "acc", Environment: gateway.Live, KeyID: "live-key", Currency: "USD"}, nil
	}
	if secret != fuzzKey {
		return gateway.Principal{}, gateway.ErrUnauthorized
	}
	return gateway.Principal{AccountID: "acc", Environment: gateway.Sandbox, KeyID: "key", Currency: "USD"}, nil
}

func (b *backends) Allow(context.Context, string, int) (gateway.RateDecision, error) {
	return gateway.RateDecision{Allowed: true, Limit: 1000, Remaining: 999, ResetAfter: time.Second}, nil
}

func (b *backends) ListPlans(_ context.Context, q gateway.PlanQuery) ([]gateway.Plan, int, error) {
	b.calls++
	b.query = q
	return nil, 0, nil
}

func (b *backends) GetPlan(_ context.Context, id, currency string) (gateway.Plan, error) {
	b.calls++
	return gateway.Plan{ID: id, Name: "Japan 1 GB", Type: gateway.Fixed, Scope: "country", Countries: []string{"JP"}, TotalBytes: 1 << 30, ValidityDays: 7, PriceMinor: 450, Currency: currency, Status: "active"}, nil
}

func (b *backends) CreateOrder(_ context.Context, _ gateway.Principal, in gateway.NewOrder) (Order, bool, error) {
	b.calls++
	b.order = &in
	return Order{ID: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c", Status: partnerapi.OrderCompleted, Environment: "sandbox", PlanID: in.PlanID, Quantity: 1,
		Price:     OrderPrice{Currency: "USD"},
		Customer:  Customer{Name: orNull(in.Customer.Name), Email: orNull(in.Customer.Email), Reference: orNull(in.Customer.Reference)},
		CreatedAt: time.Unix(0, 0).UTC(), Esims: []Esim{}}, false, nil
}

func (b *backends) GetOrder(context.Context, gateway.Principal, string) (Order, error) {
	return Order{}, gateway.ErrNotFound
}

func (b *backends) ListOrders(_ context.Context, _ gateway.Principal, q gateway.OrderQuery) ([]Order, int, error) {
	b.calls++
	b.query = q
	return nil, 0, nil
}

func (b *backends) GetEsim(context.Context, gateway.Principal, string) (Esim, error) {
	return Esim{}, gateway.ErrNotFound
}

func (b *backends) ListEsims(_ context.Context, _ gateway.Principal, q gateway.EsimQuery) ([]Esim, int, error) {
	b.calls++
	b.query = q
	return nil, 0, nil
}

func (b *backends) CreateTopUp(_ context.Context, _ gateway.Principal, in gateway.NewTopUp) (TopUp, bool, error) {
	b.calls++
	b.topUp = &in
	return TopUp{ID: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d50", EsimID: in.EsimID, PlanID: in.PlanID, Days: 7, Price: TopUpPrice{Currency: "USD"},
		Status: partnerapi.OrderCompleted, CreatedAt: time.Unix(0, 0).UTC()}, false, nil
}

func (b *backends) EsimCoverage(context.Context, gateway.Principal, string) (gateway.EsimCoverage, error) {
	b.calls++
	return gateway.EsimCoverage{Type: gateway.Fixed, Countries: []string{"FR", "JP"}}, nil
}

func (b *backends) SimulateEsim(context.Context, gateway.Principal, string, gateway.Simulation) (Esim, error) {
	return Esim{}, gateway.ErrNotFound
}

func (b *backends) ActivationCode(context.Context, string) (string, error) {
	return "", gateway.ErrNotFound
}

func (b *backends) Balance(context.Context, gateway.Principal) (gateway.Balance, error) {
	b.calls++
	return gateway.Balance{AmountMinor: 100, Currency: "USD", Environment: gateway.Sandbox}, nil
}

func (b *backends) ListEvents(_ context.Context, _ gateway.Principal, q gateway.EventQuery) ([]gateway.Event, int, error) {
	b.calls++
	b.query = q
	return nil, 0, nil
}

// fuzzAPI is the public API over backends.
func fuzzAPI() (http.Handler, *backends) {
	b := &backends{}
	h := New(Deps{
		Gate:      gateway.Gate{Accounts: b, Limiter: b, DefaultRateLimit: 1000},
		Catalogue: b, Orders: b, Wallet: b, Events: b,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return h, b
}

// answer is a response as a partner reads it.
type answer struct {
	status int
	err    ErrorBody
	raw    []byte
}

func serve(t *testing.T, h http.Handler, b *backends, req *http.Request) answer {
	t.Helper()
	b.calls, b.order, b.topUp, b.query = 0, nil, nil, nil
	req.Header.Set("Authorization", "Bearer "+fuzzKey)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	a := answer{status: rec.Code, raw: rec.Body.Bytes()}
	if !json.Valid(a.raw) || !utf8.Valid(a.raw) {
		t.Fatalf("%s %s: %d answered with a body that is not UTF-8 JSON: %q", req.Method, req.URL, a.status, a.raw)
	}
	if a.status >= 400 {
		var e struct {
			Error ErrorBody `json:"error"`
		}
		if err := json.Unmarshal(a.raw, &e); err != nil {
			t.Fatalf("%s %s: %d with %s: %v", req.Method, req.URL, a.status, a.raw, err)
		}
		a.err = e.Error
		if b.calls != 0 {
			t.Fatalf("%s %s: refused with %d after calling a backend", req.Method, req.URL, a.status)
		}
	}
	return a
}

// checkRefusal holds a 400 to the contract: invalid_request, a message,
// and each detail a field and a reason.
func checkRefusal(t *testing.T, what string, a answer) {
	t.Helper()
	if a.status != http.StatusBadRequest || a.err.Code != "invalid_request" || a.err.Message == "" || len(a.err.Details) == 0 {
		t.Fatalf("%s: %d %s; want 400 invalid_request naming a field", what, a.status, a.raw)
	}
	for _, d := range a.err.Details {
		if d.Field == "" || d.Reason == "" {
			t.Fatalf("%s: a detail without a field or a reason: %s", what, a.raw)
		}
	}
}

func postOrder(t *testing.T, h http.Handler, b *backends, body []byte) answer {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return serve(t, h, b, req)
}

// FuzzOrderBody posts arbitrary bytes as POST /v1/orders' body. Each is
// either refused as 400 invalid_request, every detail naming a field and
// a reason and nothing ordered, or passed on as one order; then the body
// named no field twice, was UTF-8 with nothing replaced, kept to the
// bounds, and the order re-encoded as JSON is accepted as the very same
// order.
func FuzzOrderBody(f *testing.F) {
	for _, seed := range []string{
		`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c"}`,
		`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c","quantity":3,"days":7,"customer":{"name":"Zo\u00eb","email":"zoe@example.com","reference":"B-1"}}`,
		`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c","quantity":1.0}`,
		`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c","quantity":1,"quantity":50}`,
		"{\"plan_id\":\"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c\",\"customer\":{\"name\":\"Ad\xffa\"}}",
		`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c","customer":{"reference":"\ud800"}}`,
		`{"Plan_ID":"x"}`,
		`[1,2]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	h, b := fuzzAPI()
	f.Fuzz(func(t *testing.T, body []byte) {
		a := postOrder(t, h, b, body)
		if a.status != http.StatusCreated {
			checkRefusal(t, "body "+strconv.Quote(string(body)), a)
			return
		}
		if b.calls != 1 || b.order == nil {
			t.Fatalf("body %q: 201 without an order", body)
		}
		got := *b.order
		if name, twice := repeatedName(body); twice {
			t.Fatalf("body %q: accepted with %q given twice", body, name)
		}
		if !utf8.Valid(body) {
			t.Fatalf("body %q: accepted, yet not UTF-8", body)
		}
		replaced := strings.Contains(got.PlanID+got.Customer.Name+got.Customer.Email+got.Customer.Reference, "\uFFFD")
		if replaced && !bytes.Contains(body, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
			t.Fatalf("body %q: accepted with text replaced by U+FFFD: %+v", body, got)
		}
		within := func(n *int, hi int) bool { return n == nil || 1 <= *n && *n <= hi }
		runes := utf8.RuneCountInString
		if !within(got.Quantity, limits.MaxQuantity) || !within(got.Days, limits.MaxDays) || runes(got.Customer.Name) > limits.MaxCustomerText ||
			runes(got.Customer.Reference) > limits.MaxCustomerText || runes(got.Customer.Email) > limits.MaxEmailLength {
			t.Fatalf("body %q: accepted out of bounds: %+v", body, got)
		}

		again := OrderRequest{PlanID: got.PlanID, Quantity: got.Quantity, Days: got.Days}
		if c := got.Customer; c != (gateway.Customer{}) {
			again.Customer = &CustomerRequest{Name: orNull(c.Name), Email: orNull(c.Email), Reference: orNull(c.Reference)}
		}
		encoded, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if a := postOrder(t, h, b, encoded); a.status != http.StatusCreated || b.order == nil || !reflect.DeepEqual(*b.order, got) {
			t.Fatalf("body %q was accepted as %+v; re-encoded as %s it answers %d %s with %+v", body, got, encoded, a.status, a.raw, b.order)
		}
	})
}

// repeatedName finds, with encoding/json's tokenizer (not jsontext, which
// the handler uses), an object member name given twice in data.
func repeatedName(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type object struct {
		names     map[string]bool
		expecting bool // a name comes next
	}
	var stack []*object // nil entries are arrays
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if name, ok := tok.(string); ok && top != nil && top.expecting {
			if top.names[name] {
				return name, true
			}
			top.names[name], top.expecting = true, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{names: map[string]bool{}, expecting: true})
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1] != nil {
			stack[len(stack)-1].expecting = true
		}
	}
}

// queryRoutes are the GET endpoints and the query parameters each
// declares.
var queryRoutes = []struct {
	path   string
	params []string
}{
	{"/v1/plans", []string{"page", "limit", "country", "type"}},
	{"/v1/orders", []string{"page", "limit", "status", "reference"}},
	{"/v1/esims", []string{"page", "limit", "order_id", "iccid"}},
	{"/v1/events", []string{"page", "limit", "event", "order_id"}},
	{"/v1/balance", nil},
	{"/v1/plans/0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c", nil},
	{"/v1/openapi.json", nil},
}

// getRaw sends GET path?rawQuery as a server would hand it over, or
// reports that no server would (a query with spaces, say).
func getRaw(t *testing.T, h http.Handler, b *backends, path, rawQuery string) (answer, bool) {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + path + "?" + rawQuery + " HTTP/1.1\r\nHost: api.test\r\n\r\n")))
	if err != nil || req.URL.RawQuery != rawQuery || req.URL.Path != path {
		return answer{}, false
	}
	return serve(t, h, b, req), true
}

// FuzzQuery sends arbitrary query strings to each GET endpoint. Each is
// either refused as 400 invalid_request naming parameters the query holds
// (and no backend is called), or answered 200; then every parameter was
// declared, given once, with a URL-encoded value, the page and its limit
// were in range, and the query the backend got, encoded afresh, is
// answered with the very same query.
func FuzzQuery(f *testing.F) {
	for i, q := range []string{"", "page=2&limit=100", "country=JP&type=fixed", "status=failed&reference=B%2D1", "order_id=0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c&iccid=8988247000000000001",
		"event=ping&order_id=x", "a=1", "limit=1;page=2", "page=1&page=2", "limit=%zz", "limit=", "=1", "limit=%2B1", "country=%ff"} {
		f.Add(uint8(i), q)
	}
	h, b := fuzzAPI()
	f.Fuzz(func(t *testing.T, route uint8, rawQuery string) {
		r := queryRoutes[int(route)%len(queryRoutes)]
		a, ok := getRaw(t, h, b, r.path, rawQuery)
		if !ok {
			return
		}
		what := "GET " + r.path + "?" + rawQuery
		if a.status != http.StatusOK {
			checkRefusal(t, what, a)
			for _, d := range a.err.Details {
				if !namedIn(d.Field, rawQuery) {
					t.Fatalf("%s: %d names %q, which the query does not hold: %s", what, a.status, d.Field, a.raw)
				}
			}
			return
		}
		if fault := oracleQueryFault(rawQuery, r.params); fault != "" {
			t.Fatalf("%s: answered 200, yet %s", what, fault)
		}
		if r.params == nil {
			return
		}
		got := b.query
		again := encodeQuery(t, got)
		if a, ok := getRaw(t, h, b, r.path, again); !ok || a.status != http.StatusOK || !reflect.DeepEqual(b.query, got) {
			t.Fatalf("%s reached the backend as %+v; encoded afresh as ?%s it answers %d %s with %+v", what, got, again, a.status, a.raw, b.query)
		}
	})
}

// namedIn tells whether a refused parameter's name is one the query
// holds: as sent, decoded, or re-encoded (what the API says of a name
// that is not UTF-8).
func namedIn(field, rawQuery string) bool {
	for pair := range strings.SplitSeq(rawQuery, "&") {
		rawName, _, _ := strings.Cut(pair, "=")
		names := []string{pair, rawName}
		if name, err := url.QueryUnescape(rawName); err == nil {
			names = append(names, name, url.QueryEscape(name))
		}
		for _, n := range names {
			if n == field || url.QueryEscape(n) == field {
				return true
			}
		}
	}
	return false
}

// oracleQueryFault says, by a reading of its own, what is wrong with a query
// the API should have refused; "" when nothing is.
func oracleQueryFault(rawQuery string, declared []string) string {
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, errName := url.QueryUnescape(rawName)
		value, errValue := url.QueryUnescape(rawValue)
		switch {
		case strings.Contains(pair, ";") || errName != nil || errValue != nil:
			return strconv.Quote(pair) + " is not URL-encoded"
		case !slices.Contains(declared, name):
			return strconv.Quote(name) + " is not a parameter of this endpoint"
		case seen[name]:
			return strconv.Quote(name) + " is given twice"
		case value == "":
			return strconv.Quote(name) + " has no value"
		}
		seen[name] = true
	}
	return ""
}

// encodeQuery is the query a backend got, as a partner would write it.
func encodeQuery(t *testing.T, q any) string {
	t.Helper()
	v := url.Values{}
	set := func(name, value string) {
		if value != "" {
			v.Set(name, value)
		}
	}
	page := func(page, limit int) {
		if page < 1 || page > limits.MaxPage || limit < 1 || limit > limits.MaxPageLimit {
			t.Fatalf("a query out of range reached the backend: %+v", q)
		}
		set("page", strconv.Itoa(page))
		set("limit", strconv.Itoa(limit))
	}
	switch q := q.(type) {
	case gateway.PlanQuery:
		page(q.Page, q.Limit)
		set("country", q.Country)
		set("type", string(q.Type))
	case gateway.OrderQuery:
		page(q.Page, q.Limit)
		set("status", string(q.Status))
		set("reference", q.Reference)
	case gateway.EsimQuery:
		page(q.Page, q.Limit)
		set("order_id", q.OrderID)
		set("iccid", q.ICCID)
	case gateway.EventQuery:
		page(q.Page, q.Limit)
		set("event", q.Type)
		set("order_id", q.OrderID)
	default:
		t.Fatalf("no list query reached the backend: %#v", q)
	}
	return v.Encode()
}

// The targets' own checks must be able to fail: the oracles see what they
// are there to see.
func TestFuzzOraclesSeeFaults(t *testing.T) {
	if name, ok := repeatedName([]byte(`{"a":{"b":1,"b":2}}`)); !ok || name != "b" {
		t.Errorf("repeatedName missed b: %q %v", name, ok)
	}
	if _, ok := repeatedName([]byte(`{"a":[{"b":1},{"b":2}],"b":3}`)); ok {
		t.Error("repeatedName found a repeat in distinct objects")
	}
	for q, want := range map[string]bool{"page=1&page=2": true, "limit=%zz": true, "zz=1": true, "limit=": true, "page=1&&limit=2": false} {
		if got := oracleQueryFault(q, []string{"page", "limit"}) != ""; got != want {
			t.Errorf("oracleQueryFault(%q) found a fault: %v, want %v", q, got, want)
		}
	}
	if !namedIn("limit", "a=1&limit=%2B1") || namedIn("page", "limit=1") {
		t.Error("namedIn")
	}
	h, b := fuzzAPI()
	if a := postOrder(t, h, b, []byte(`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c","quantity":2}`)); a.status != http.StatusCreated || b.order == nil || *b.order.Quantity != 2 {
		t.Fatalf("a good order: %d %s", a.status, a.raw)
	}
	if a, ok := getRaw(t, h, b, "/v1/plans", "page=2&country=jp"); !ok || a.status != http.StatusOK || !reflect.DeepEqual(b.query, gateway.PlanQuery{Country: "JP", Currency: "USD", Page: 2, Limit: limits.DefaultPageLimit}) {
		t.Fatalf("a good query: %d %s, %+v", a.status, a.raw, b.query)
	}
	if _, ok := getRaw(t, h, b, "/v1/plans", "a b"); ok {
		t.Error("a query with a space was sent")
	}
}
