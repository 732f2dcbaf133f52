package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/proto/partnerapi"
	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/twirpclient"
)

// afterSale answers as an ordering service holding one eSIM: GetEsim,
// CreateTopUp and SimulateEsim answer it, its top-up or err, and every
// request is recorded.
type afterSale struct {
	orderingv1.Ordering // any other method panics: the tests call none
	esim                *orderingv1.Esim
	topUp               *orderingv1.TopUp
	replayed            bool
	err                 error

	mu       sync.Mutex
	received []proto.Message
}

func (s *afterSale) record(m proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received = append(s.received, m)
}

// calls are the requests received so far.
func (s *afterSale) calls() []proto.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

func (s *afterSale) GetEsim(_ context.Context, req *orderingv1.GetEsimRequest) (*orderingv1.Esim, error) {
	s.record(req)
	if s.err != nil {
		return nil, s.err
	}
	return s.esim, nil
}

func (s *afterSale) CreateTopUp(_ context.Context, req *orderingv1.CreateTopUpRequest) (*orderingv1.CreateTopUpResponse, error) {
	s.record(req)
	if s.err != nil {
		return nil, s.err
	}
	return &orderingv1.CreateTopUpResponse{Topup: s.topUp, Replayed: s.replayed}, nil
}

func (s *afterSale) SimulateEsim(_ context.Context, req *orderingv1.SimulateEsimRequest) (*orderingv1.Esim, error) {
	s.record(req)
	if s.err != nil {
		return nil, s.err
	}
	return s.esim, nil
}

// liveKey is a live key of the same account as fuzzKey's.
const liveKey = "sk_live_fuzz"

// afterSaleAPI is the public API reaching s through the gateway's
// ordering client; the catalogue and the rest are backends.
func afterSaleAPI(t *testing.T, s *afterSale) (http.Handler, *backends) {
	t.Helper()
	srv := httptest.NewServer(orderingv1.NewOrderingServer(s))
	t.Cleanup(srv.Close)
	b := &backends{}
	return New(Deps{
		Gate:      gateway.Gate{Accounts: b, Limiter: b, DefaultRateLimit: 1000},
		Catalogue: b, Wallet: b, Events: b,
		Orders: twirpclient.NewOrdering(srv.URL, srv.Client(), srv.Client(), 10*time.Second, nil),
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}), b
}

const (
	esimID = "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4f"
	planID = "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4e"
)

// activeEsim is an eSIM after the sale as ordering answers it: active,
// part used, topped up once.
func activeEsim() *orderingv1.Esim {
	at := timestamppb.New(time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.UTC))
	e := storedOrder().GetEsims()[0]
	e.PlanId, e.PerDay, e.Countries = planID, false, []string{"FR", "JP"}
	e.Status, e.InstalledAt, e.ActivatedAt, e.ExpiresAt = "ACTIVE", at, at, timestamppb.New(at.AsTime().Add(60*24*time.Hour))
	e.Data = &orderingv1.EsimData{TotalBytes: 10 << 30, UsedBytes: 3 << 30, UpdatedAt: at}
	e.Topups = []*orderingv1.TopUp{completedTopUp()}
	return e
}

func completedTopUp() *orderingv1.TopUp {
	return &orderingv1.TopUp{
		Id: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d50", EsimId: esimID, PlanId: planID, Days: 30, Bytes: 5 << 30,
		Price:  &orderingv1.Price{UnitMinor: 900, TotalMinor: 900, Currency: "USD"},
		Status: orderingv1.OrderStatus_ORDER_STATUS_COMPLETED, CreatedAt: timestamppb.New(time.Date(2025, 3, 15, 8, 0, 0, 0, time.UTC)),
		AccountId: "acc", Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, EsimOrderId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c",
	}
}

func failedTopUp() *orderingv1.TopUp {
	t := completedTopUp()
	t.Status = orderingv1.OrderStatus_ORDER_STATUS_FAILED
	t.Error = &orderingv1.OrderError{Code: "provider_error", Message: "the network refused the bundle"}
	return t
}

func post(t *testing.T, h http.Handler, b *backends, key, path, idempotencyKey, body string) (answer, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	return serveAs(t, h, b, key, req)
}

// serveAs is serve with the key given.
func serveAs(t *testing.T, h http.Handler, b *backends, key string, req *http.Request) (answer, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	b.calls, b.query = 0, nil
	req.Header.Set("Authorization", "Bearer "+key)
	h.ServeHTTP(rec, req)
	a := answer{status: rec.Code, raw: rec.Body.Bytes()}
	if a.status >= 400 {
		var e struct {
			Error ErrorBody `json:"error"`
		}
		if err := json.Unmarshal(a.raw, &e); err != nil {
			t.Fatalf("%s %s: %d with %s: %v", req.Method, req.URL, a.status, a.raw, err)
		}
		a.err = e.Error
	}
	return a, rec.Header()
}

func fields(e ErrorBody) []string {
	var out []string
	for _, d := range e.Details {
		out = append(out, d.Field)
	}
	slices.Sort(out)
	return out
}

// A top-up answers, byte for byte, the data of its topup.completed
// event (partnerapi.TopUpFromProto), and its replay the same with 200
// and Idempotent-Replay; ordering is asked in the key's scope and
// currency, with the path's eSIM, the body and the key.
func TestTopUpAnswersTheTopUp(t *testing.T) {
	s := &afterSale{esim: activeEsim(), topUp: completedTopUp()}
	h, b := afterSaleAPI(t, s)
	rendered, err := partnerapi.TopUpFromProto(s.topUp)
	if err != nil {
		t.Fatal(err)
	}
	data, err := partnerapi.Marshal(rendered)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte(`{"data":`), data...), "}\n"...)

	a, header := post(t, h, b, fuzzKey, "/v1/esims/"+strings.ToUpper(esimID)+"/topups", "tk-1", `{"plan_id":"`+planID+`","days":1}`)
	if a.status != http.StatusCreated || !bytes.Equal(a.raw, want) || header.Get("Idempotent-Replay") != "" {
		t.Fatalf("POST topups: %d (replay %q)\n%s\nwant\n%s", a.status, header.Get("Idempotent-Replay"), a.raw, want)
	}
	days := int32(1)
	wantReq := &orderingv1.CreateTopUpRequest{
		Scope:    &orderingv1.Scope{AccountId: "acc", Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
		Currency: "USD", IdempotencyKey: "tk-1", EsimId: esimID, PlanId: planID, Days: &days,
	}
	if got := s.calls(); len(got) != 1 || !proto.Equal(got[0], wantReq) {
		t.Fatalf("ordering received %v, want %v", got, wantReq)
	}

	s.replayed = true
	a, header = post(t, h, b, fuzzKey, "/v1/esims/"+esimID+"/topups", "tk-1", `{"plan_id":"`+planID+`","days":1}`)
	if a.status != http.StatusOK || !bytes.Equal(a.raw, want) || header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d (replay %q)\n%s", a.status, header.Get("Idempotent-Replay"), a.raw)
	}
	// Days left out are left out: ordering applies the plan's default.
	if _, _ = post(t, h, b, fuzzKey, "/v1/esims/"+esimID+"/topups", "", `{"plan_id":"`+planID+`"}`); s.calls()[2].(*orderingv1.CreateTopUpRequest).Days != nil {
		t.Errorf("days sent although left out: %v", s.calls()[2])
	}
}

// A top-up the provider refused is a 502 provider_error naming it,
// refunded, as a failed order is; its replay the same 502 with
// Idempotent-Replay.
func TestAFailedTopUpIsAProviderError(t *testing.T) {
	s := &afterSale{esim: activeEsim(), topUp: failedTopUp()}
	h, b := afterSaleAPI(t, s)
	body := `{"plan_id":"` + planID + `"}`
	a, header := post(t, h, b, fuzzKey, "/v1/esims/"+esimID+"/topups", "failing", body)
	if a.status != http.StatusBadGateway || a.err.Code != "provider_error" || header.Get("Idempotent-Replay") != "" ||
		!strings.Contains(a.err.Message, s.topUp.GetId()) || !strings.Contains(a.err.Message, "refunded") || !strings.Contains(a.err.Message, "the network refused the bundle") {
		t.Fatalf("failed top-up: %d (replay %q) %s", a.status, header.Get("Idempotent-Replay"), a.raw)
	}
	s.replayed = true
	re, header := post(t, h, b, fuzzKey, "/v1/esims/"+esimID+"/topups", "failing", body)
	if re.status != http.StatusBadGateway || re.err.Code != "provider_error" || header.Get("Idempotent-Replay") != "true" || re.err.Message != a.err.Message {
		t.Fatalf("replayed failure: %d (replay %q) %s; want the first message %q", re.status, header.Get("Idempotent-Replay"), re.raw, a.err.Message)
	}
}

// Every refusal of a top-up: the status, the code and the fields named;
// what the gateway refuses itself never reaches ordering.
func TestEveryBadTopUpIsRefused(t *testing.T) {
	invalid := func(field string) error {
		return twirp.NewError(twirp.InvalidArgument, field+": no").WithMeta("argument", field).WithMeta("reason", "no")
	}
	valid := `{"plan_id":"` + planID + `"}`
	for _, tc := range []struct {
		name, path, key, body string
		ordering              error // ordering's answer; nil: ordering is not to be called
		status                int
		code                  string
		fields                []string
	}{
		{"incompatible plan", esimID, "k", valid, invalid("plan_id"), 400, "invalid_request", []string{"plan_id"}},
		{"expired eSIM", esimID, "k", valid, invalid("id"), 400, "invalid_request", []string{"id"}},
		{"days on a fixed plan", esimID, "k", `{"plan_id":"` + planID + `","days":2}`, invalid("days"), 400, "invalid_request", []string{"days"}},
		{"key used for another request", esimID, "k", valid, invalid("Idempotency-Key"), 400, "invalid_request", []string{"Idempotency-Key"}},
		{"unknown eSIM or plan", esimID, "k", valid, twirp.NotFoundError("no"), 404, "not_found", nil},
		{"insufficient funds", esimID, "k", valid, twirp.NewError(twirp.FailedPrecondition, "short").WithMeta("reason", "insufficient_funds"), 402, "insufficient_funds", nil},
		{"too many in flight", esimID, "k", valid, twirp.NewError(twirp.ResourceExhausted, "busy"), 429, "rate_limited", nil},
		{"malformed eSIM id", "not-a-uuid", "k", valid, nil, 404, "not_found", nil},
		{"eSIM id in braces", "{" + esimID + "}", "k", valid, nil, 404, "not_found", nil},
		{"malformed eSIM id, bad body", "not-a-uuid", "k", `{"plan_id":1,"x":2}`, nil, 404, "not_found", nil},
		{"no plan", esimID, "k", `{}`, nil, 400, "invalid_request", []string{"plan_id"}},
		{"plan not a uuid", esimID, "k", `{"plan_id":"japan"}`, nil, 400, "invalid_request", []string{"plan_id"}},
		{"days 0", esimID, "k", `{"plan_id":"` + planID + `","days":0}`, nil, 400, "invalid_request", []string{"days"}},
		{"days 366", esimID, "k", `{"plan_id":"` + planID + `","days":366}`, nil, 400, "invalid_request", []string{"days"}},
		{"days a fraction", esimID, "k", `{"plan_id":"` + planID + `","days":1.5}`, nil, 400, "invalid_request", []string{"days"}},
		{"unknown field", esimID, "k", `{"plan_id":"` + planID + `","quantity":2}`, nil, 400, "invalid_request", []string{"quantity"}},
		{"malformed JSON", esimID, "k", `{"plan_id":`, nil, 400, "invalid_request", []string{"body"}},
		{"idempotency key too long", esimID, strings.Repeat("k", 256), valid, nil, 400, "invalid_request", []string{"Idempotency-Key"}},
		{"idempotency key not ASCII", esimID, "clé", valid, nil, 400, "invalid_request", []string{"Idempotency-Key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &afterSale{esim: activeEsim(), err: tc.ordering}
			h, b := afterSaleAPI(t, s)
			a, header := post(t, h, b, fuzzKey, "/v1/esims/"+tc.path+"/topups", tc.key, tc.body)
			if a.status != tc.status || a.err.Code != tc.code || !slices.Equal(fields(a.err), tc.fields) {
				t.Fatalf("%d %s %v; want %d %s naming %v: %s", a.status, a.err.Code, fields(a.err), tc.status, tc.code, tc.fields, a.raw)
			}
			if calls := len(s.calls()); (tc.ordering == nil) != (calls == 0) {
				t.Errorf("ordering called %d times", calls)
			}
			if tc.status == http.StatusTooManyRequests && header.Get("Retry-After") != "60" {
				t.Errorf("Retry-After %q", header.Get("Retry-After"))
			}
		})
	}
}

// The plans that may top up an eSIM are the catalogue's of its plan's
// type covering its countries, with the other filters and paging as
// asked; its eSIM is read in the key's scope.
func TestPlansForATopUp(t *testing.T) {
	s := &afterSale{esim: activeEsim()}
	h, b := afterSaleAPI(t, s)
	a, _ := serveAs(t, h, b, fuzzKey, httptest.NewRequest(http.MethodGet, "/v1/plans?topup_for="+esimID+"&country=jp&page=2&limit=5", nil))
	want := gateway.PlanQuery{Country: "JP", Covers: []string{"FR", "JP"}, Type: gateway.Fixed, Currency: "USD", Page: 2, Limit: 5}
	q, _ := b.query.(gateway.PlanQuery)
	if a.status != http.StatusOK || q.Country != want.Country || !slices.Equal(q.Covers, want.Covers) || q.Type != want.Type || q.Currency != want.Currency || q.Page != 2 || q.Limit != 5 {
		t.Fatalf("GET /v1/plans?topup_for: %d %s; the catalogue was asked %+v, want %+v", a.status, a.raw, b.query, want)
	}
	wantReq := &orderingv1.GetEsimRequest{Id: esimID, Scope: &orderingv1.Scope{AccountId: "acc", Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}}
	if got := s.calls(); len(got) != 1 || !proto.Equal(got[0], wantReq) {
		t.Fatalf("ordering received %v, want %v", got, wantReq)
	}

	// A per-day eSIM's top-ups are per-day plans; asked for fixed ones, none.
	s.esim.PerDay = true
	if a, _ := serveAs(t, h, b, fuzzKey, httptest.NewRequest(http.MethodGet, "/v1/plans?topup_for="+esimID, nil)); a.status != http.StatusOK || b.query.(gateway.PlanQuery).Type != gateway.PerDay {
		t.Errorf("per-day eSIM: %d, catalogue asked %+v", a.status, b.query)
	}
	a, _ = serveAs(t, h, b, fuzzKey, httptest.NewRequest(http.MethodGet, "/v1/plans?topup_for="+esimID+"&type=fixed", nil))
	if a.status != http.StatusOK || !strings.HasPrefix(string(a.raw), `{"data":[],"pagination":{"page":1,"limit":20,"total":0,"has_more":false}}`) {
		t.Errorf("fixed plans for a per-day eSIM: %d %s", a.status, a.raw)
	}
}

func TestPlansForATopUpRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		ordering    error
		status      int
		code        string
		fields      []string
	}{
		{"malformed id", "topup_for=nope", nil, 400, "invalid_request", []string{"topup_for"}},
		{"id in braces", "topup_for={" + esimID + "}", nil, 400, "invalid_request", []string{"topup_for"}},
		{"given twice", "topup_for=" + esimID + "&topup_for=" + esimID, nil, 400, "invalid_request", []string{"topup_for"}},
		{"unknown or another's eSIM", "topup_for=" + esimID, twirp.NotFoundError("no"), 404, "not_found", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &afterSale{esim: activeEsim(), err: tc.ordering}
			h, b := afterSaleAPI(t, s)
			a, _ := serveAs(t, h, b, fuzzKey, httptest.NewRequest(http.MethodGet, "/v1/plans?"+tc.query, nil))
			if a.status != tc.status || a.err.Code != tc.code || !slices.Equal(fields(a.err), tc.fields) {
				t.Fatalf("%d %s %v; want %d %s naming %v: %s", a.status, a.err.Code, fields(a.err), tc.status, tc.code, tc.fields, a.raw)
			}
			if calls := len(s.calls()); (tc.ordering == nil) != (calls == 0) || b.calls != 0 {
				t.Errorf("ordering called %d times, the catalogue %d", calls, b.calls)
			}
		})
	}
}

// A simulation answers the eSIM as GET /v1/esims/{id} renders it, after
// asking ordering for the action in the key's scope.
func TestSimulateAnswersTheEsim(t *testing.T) {
	s := &afterSale{esim: activeEsim()}
	h, b := afterSaleAPI(t, s)
	rendered, err := partnerapi.EsimFromProto(s.esim)
	if err != nil {
		t.Fatal(err)
	}
	data, err := partnerapi.Marshal(rendered)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := post(t, h, b, fuzzKey, "/v1/sandbox/esims/"+esimID+"/simulate", "", `{"action":"consume","bytes":1048576}`)
	if want := append(append([]byte(`{"data":`), data...), "}\n"...); a.status != http.StatusOK || !bytes.Equal(a.raw, want) {
		t.Fatalf("simulate: %d\n%s\nwant\n%s", a.status, a.raw, want)
	}
	n := int64(1 << 20)
	wantReq := &orderingv1.SimulateEsimRequest{
		Scope:  &orderingv1.Scope{AccountId: "acc", Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
		EsimId: esimID, Action: "consume", Bytes: &n,
	}
	if got := s.calls(); len(got) != 1 || !proto.Equal(got[0], wantReq) {
		t.Fatalf("ordering received %v, want %v", got, wantReq)
	}
	// The remaining bytes are the total less the used.
	if !bytes.Contains(a.raw, []byte(`"remaining_bytes":7516192768`)) || !bytes.Contains(a.raw, []byte(`"topups":[{"id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d50"`)) {
		t.Errorf("eSIM without its remaining bytes or top-ups: %s", a.raw)
	}
}

// Every refusal of a simulation; a live key's is not_found whatever its
// body, and never reaches ordering.
func TestEveryBadSimulationIsRefused(t *testing.T) {
	invalid := func(field string) error {
		return twirp.NewError(twirp.InvalidArgument, field+": no").WithMeta("argument", field).WithMeta("reason", "no")
	}
	for _, tc := range []struct {
		name, key, path, body string
		ordering              error // nil: ordering is not to be called
		status                int
		code                  string
		fields                []string
	}{
		{"live key", liveKey, esimID, `{"action":"install"}`, nil, 404, "not_found", nil},
		{"live key, bad body", liveKey, esimID, `{"action":"fly","colour":1}`, nil, 404, "not_found", nil},
		{"live key, malformed id", liveKey, "nope", `{`, nil, 404, "not_found", nil},
		{"action out of order", fuzzKey, esimID, `{"action":"activate"}`, invalid("action"), 400, "invalid_request", []string{"action"}},
		{"bytes without consume", fuzzKey, esimID, `{"action":"install","bytes":5}`, invalid("bytes"), 400, "invalid_request", []string{"bytes"}},
		{"unknown or another's eSIM", fuzzKey, esimID, `{"action":"install"}`, twirp.NotFoundError("no"), 404, "not_found", nil},
		{"malformed id", fuzzKey, "nope", `{"action":"install"}`, nil, 404, "not_found", nil},
		{"malformed id, bad body", fuzzKey, "nope", `{"action":"fly"`, nil, 404, "not_found", nil},
		{"unknown action", fuzzKey, esimID, `{"action":"fly"}`, nil, 400, "invalid_request", []string{"action"}},
		{"no action", fuzzKey, esimID, `{}`, nil, 400, "invalid_request", []string{"action"}},
		{"bytes 0", fuzzKey, esimID, `{"action":"consume","bytes":0}`, nil, 400, "invalid_request", []string{"bytes"}},
		{"bytes a string", fuzzKey, esimID, `{"action":"consume","bytes":"5"}`, nil, 400, "invalid_request", []string{"bytes"}},
		{"unknown field", fuzzKey, esimID, `{"action":"install","when":"now"}`, nil, 400, "invalid_request", []string{"when"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &afterSale{esim: activeEsim(), err: tc.ordering}
			h, b := afterSaleAPI(t, s)
			a, _ := post(t, h, b, tc.key, "/v1/sandbox/esims/"+tc.path+"/simulate", "", tc.body)
			if a.status != tc.status || a.err.Code != tc.code || !slices.Equal(fields(a.err), tc.fields) {
				t.Fatalf("%d %s %v; want %d %s naming %v: %s", a.status, a.err.Code, fields(a.err), tc.status, tc.code, tc.fields, a.raw)
			}
			if calls := len(s.calls()); (tc.ordering == nil) != (calls == 0) {
				t.Errorf("ordering called %d times", calls)
			}
		})
	}
}
