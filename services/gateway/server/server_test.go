package server_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	accountsserver "github.com/esimplatform/esim/services/accounts/server"
	catalogueserver "github.com/esimplatform/esim/services/catalogue/server"
	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/redis/redistest"
	"github.com/esimplatform/esim/services/gateway/server"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	orderingserver "github.com/esimplatform/esim/services/ordering/server"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
	walletserver "github.com/esimplatform/esim/services/wallet/server"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

func init() {
	// Plan and key ids are UUID v7 or v5; RFC 9562 covers both.
	openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
}

// platform is a gateway in front of real accounts and catalogue servers,
// each a real HTTP server on loopback with its own Postgres database, and
// the real Redis.
type platform struct {
	t         testing.TB
	gateway   string
	accounts  accountsv1.Accounts
	catalogue cataloguev1.Catalogue
	router    routers.Router
	spec      []byte
	// metrics serves the services' /metrics (one registry for all of them).
	metrics http.Handler
	// replica starts another gateway beside the first, sharing its Redis,
	// accounts and catalogue, and returns its URL.
	replica func() string
	// money tops up balances and checks them, through the wallet; orders
	// reads orders as an operator.
	money  *orderingtest.Deps
	orders orderingv1.Ordering
	// webhooks sets endpoints and reads events as an operator.
	webhooks webhookv1.Webhook
}

type options struct {
	redisURL         string
	defaultRateLimit int
	// accountsURL, when set, replaces the accounts server the gateway
	// calls (the test's own accounts server still runs for setup).
	accountsURL string
	// spans, when set, records every span of every service of the test.
	spans *tracetest.InMemoryExporter
	// authCacheTTL is AUTH_CACHE_TTL; 2 s, its default, when zero.
	authCacheTTL time.Duration
	// endpointCAFile is the webhook service's ENDPOINT_CA_FILE: the CA of
	// a test's https receiver.
	endpointCAFile string
	// kafka, when set, is the cluster ordering and webhook use instead of
	// kafkatest.New's: a broker the test stops and starts again.
	kafka *kafkatest.Cluster
	// smdp, when set, is the SM-DP+ of live orders (every plan of profile
	// type esim-travel, each ES2+ call bounded by smdpTimeout); without
	// it live orders have no provider.
	smdp        *smdpsimtest.Sim
	smdpTimeout time.Duration
	// ordering, when set, adjusts ordering's configuration.
	ordering func(*orderingserver.Config)
}

// testAuthCacheSecret is every test gateway's AUTH_CACHE_SECRET: replicas
// share one, as they must to share the cache.
var testAuthCacheSecret = config.NewSecret("test-auth-cache-secret-0123456789abcdef")

func start(t testing.TB, opt options) *platform {
	t.Helper()
	ctx := context.Background()
	var telOpts []telemetry.Option
	if opt.spans != nil {
		telOpts = append(telOpts, telemetry.WithSpanExporter(opt.spans))
	}
	tel, err := telemetry.Setup(ctx, "test", telemetry.Config{LogLevel: "error"}, io.Discard, telOpts...)
	if err != nil {
		t.Fatal(err)
	}

	acc, err := accountsserver.New(ctx, accountsserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acc.Close)
	accSrv := httptest.NewServer(acc.Handler())
	t.Cleanup(accSrv.Close)

	cat, err := catalogueserver.New(ctx, catalogueserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), SeedCatalogue: true, Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	catSrv := httptest.NewServer(cat.Handler())
	t.Cleanup(catSrv.Close)

	wal, err := walletserver.New(ctx, walletserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wal.Close)
	walSrv := httptest.NewServer(wal.Handler())
	t.Cleanup(walSrv.Close)

	// The first gateway's address is known before it starts, so that the
	// eSIMs' QR links point at it.
	first := httptest.NewUnstartedServer(nil)
	t.Cleanup(first.Close)
	money := &orderingtest.Deps{CatalogueURL: catSrv.URL, WalletURL: walSrv.URL,
		Wallet: walletv1.NewWalletProtobufClient(walSrv.URL, internalauthtest.Client(internalauth.Operator))}
	if opt.kafka != nil {
		money.Kafka = *opt.kafka
	}
	orderingCfg := money.Config(t)
	orderingCfg.QRBaseURL = config.BaseURL("http://" + first.Listener.Addr().String() + "/qr")
	if opt.smdp != nil {
		orderingCfg.SMDP = orderingtest.SMDP(opt.smdp, "esim-travel", cmp.Or(opt.smdpTimeout, 5*time.Second))
	}
	if opt.ordering != nil {
		opt.ordering(&orderingCfg)
	}
	_, orderingURL := orderingtest.StartWith(t, orderingCfg, tel)

	// The webhook service reads the events ordering publishes.
	hooksCfg := webhooktest.Config(t, money.Kafka)
	hooksCfg.EndpointCAFile = opt.endpointCAFile
	_, webhookURL := webhooktest.StartServer(t, hooksCfg, tel)

	if opt.redisURL == "" {
		opt.redisURL = redistest.URL()
	}
	if opt.defaultRateLimit == 0 {
		opt.defaultRateLimit = 1200
	}
	if opt.accountsURL == "" {
		opt.accountsURL = accSrv.URL
	}
	if opt.authCacheTTL == 0 {
		opt.authCacheTTL = 2 * time.Second
	}
	newGateway := func() http.Handler {
		gw, err := server.New(ctx, server.Config{
			AccountsURL:        config.BaseURL(opt.accountsURL),
			CatalogueURL:       config.BaseURL(catSrv.URL),
			OrderingURL:        config.BaseURL(orderingURL),
			WalletURL:          config.BaseURL(walSrv.URL),
			WebhookURL:         config.BaseURL(webhookURL),
			ServiceTimeout:     5 * time.Second,
			OrderTimeout:       20 * time.Second,
			RedisURL:           config.NewSecretURL(opt.redisURL),
			RateLimitPerMinute: opt.defaultRateLimit,
			AuthCacheTTL:       opt.authCacheTTL,
			AuthCacheSecret:    testAuthCacheSecret,
			InternalToken:      config.NewSecret(internalauthtest.Token(internalauth.Gateway)),
		}, tel)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(gw.Close)
		return gw.Handler()
	}
	startGateway := func() string {
		gwSrv := httptest.NewServer(newGateway())
		t.Cleanup(gwSrv.Close)
		return gwSrv.URL
	}
	first.Config.Handler = newGateway()
	first.Start()

	p := &platform{
		t:         t,
		gateway:   first.URL,
		replica:   startGateway,
		accounts:  accountsv1.NewAccountsProtobufClient(accSrv.URL, internalauthtest.Client(internalauth.Operator)),
		catalogue: cataloguev1.NewCatalogueProtobufClient(catSrv.URL, internalauthtest.Client(internalauth.Operator)),
		metrics:   tel.MetricsHandler,
		money:     money,
		orders:    orderingtest.Client(orderingURL, internalauth.Operator),
		webhooks:  webhooktest.Client(webhookURL, internalauth.Operator),
	}
	p.loadSpec()
	return p
}

// loadSpec fetches the served OpenAPI document and prepares a router that
// every later response is validated against.
func (p *platform) loadSpec() {
	resp, err := http.Get(p.gateway + "/v1/openapi.json")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	p.spec, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("openapi.json: %d %s", resp.StatusCode, p.spec)
	}
	doc, err := openapi3.NewLoader().LoadFromData(p.spec)
	if err != nil {
		p.t.Fatalf("load openapi: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		p.t.Fatalf("openapi document is invalid: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: p.gateway + "/v1"}}
	p.router, err = gorillamux.NewRouter(doc)
	if err != nil {
		p.t.Fatal(err)
	}
}

// account creates an account and a key in env; it returns both ids and the
// secret.
func (p *platform) account(currency string, env accountsv1.Environment) (accountID, keyID, secret string) {
	p.t.Helper()
	ctx := context.Background()
	a, err := p.accounts.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: "Test Travel " + currency, Currency: currency})
	if err != nil {
		p.t.Fatal(err)
	}
	k, err := p.accounts.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: a.GetId(), Environment: env, Name: "test"})
	if err != nil {
		p.t.Fatal(err)
	}
	return a.GetId(), k.GetKey().GetId(), k.GetSecret()
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// get sends a GET with the given Authorization header value (none when
// empty) and validates the response against the OpenAPI document.
func (p *platform) get(path, authorization string) response {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.gateway+path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return p.send(req)
}

// send makes a request and checks its answer against the OpenAPI document.
func (p *platform) send(req *http.Request) response {
	p.t.Helper()
	status, header, body := httpservertest.Exchange(p.t, req)
	r := response{status: status, header: header, body: []byte(body)}
	p.validate(req, r)
	if r.header.Get("Request-Id") == "" {
		p.t.Errorf("%s %s: no Request-Id header", req.Method, req.URL.Path)
	}
	return r
}

// firstPlanID lists plans as key's partner would, with query, and returns
// the first one's id.
func (p *platform) firstPlanID(key, query string) string {
	p.t.Helper()
	var list planList
	p.get("/v1/plans?"+query, bearer(key)).json(p.t, &list)
	if len(list.Data) == 0 {
		p.t.Fatalf("no plan for ?%s", query)
	}
	return list.Data[0].ID
}

func (p *platform) validate(req *http.Request, r response) {
	p.t.Helper()
	// The document's server is the first gateway's address; an answer from
	// another replica is judged as if it came from there.
	first, _ := url.Parse(p.gateway)
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = first.Scheme, first.Host, first.Host
	route, params, err := p.router.FindRoute(req)
	if err != nil {
		// Only paths outside the contract may miss; they answer 404, or 429
		// to a known key over its limit, with the error body.
		if r.status != http.StatusNotFound && r.status != http.StatusTooManyRequests {
			p.t.Errorf("%s %s is not in the OpenAPI document but answered %d", req.Method, req.URL.Path, r.status)
		}
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 r.status,
		Header:                 r.header,
		Body:                   io.NopCloser(bytes.NewReader(r.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		p.t.Errorf("%s %s -> %d does not match the OpenAPI document: %v\nbody: %s", req.Method, req.URL, r.status, err, r.body)
	}
}

type planJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Coverage struct {
		Scope     string   `json:"scope"`
		Countries []string `json:"countries"`
		Region    *string  `json:"region"`
	} `json:"coverage"`
	Data struct {
		Unlimited  bool   `json:"unlimited"`
		TotalBytes *int64 `json:"total_bytes"`
	} `json:"data"`
	ValidityDays *int `json:"validity_days"`
	Price        struct {
		Amount   json.Number `json:"amount"`
		Currency string      `json:"currency"`
	} `json:"price"`
}

type planList struct {
	Data       []planJSON `json:"data"`
	Pagination struct {
		Page    int  `json:"page"`
		Limit   int  `json:"limit"`
		Total   int  `json:"total"`
		HasMore bool `json:"has_more"`
	} `json:"pagination"`
}

type errorJSON struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Field  string `json:"field"`
			Reason string `json:"reason"`
		} `json:"details"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

func (p *platform) expectError(r response, status int, code string) errorJSON {
	p.t.Helper()
	if r.status != status {
		p.t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	var e errorJSON
	r.json(p.t, &e)
	if e.Error.Code != code || e.Error.Message == "" {
		p.t.Fatalf("error %+v, want code %s with a message", e.Error, code)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != r.header.Get("Request-Id") {
		p.t.Fatalf("request_id %q does not match the Request-Id header %q", e.Error.RequestID, r.header.Get("Request-Id"))
	}
	return e
}

func bearer(secret string) string { return "Bearer " + secret }

// TestBackendCallsAreMeasured: every rate-limit check and every plan
// lookup rides a call to Redis or the catalogue, and /metrics shows those
// calls by backend: how many callers each served and how long it took.
func TestBackendCallsAreMeasured(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	id := p.firstPlanID(key, "limit=1") // a check, no lookup: lists are not coalesced
	const found = 5
	for range found {
		if r := p.get("/v1/plans/"+id, bearer(key)); r.status != http.StatusOK {
			t.Fatalf("GET plan: %d %s", r.status, r.body)
		}
	}
	// An unknown plan is still a lookup the catalogue answered.
	if r := p.get("/v1/plans/"+uuid.NewString(), bearer(key)); r.status != http.StatusNotFound {
		t.Fatalf("GET unknown plan: %d %s", r.status, r.body)
	}

	metrics := telemetrytest.Scrape(p.metrics)
	// One request at a time: every call carried one caller.
	for _, c := range []struct {
		series string
		labels map[string]string
		want   string
	}{
		{"backend_call_batch_size_sum", map[string]string{"backend": "catalogue"}, "6"},
		{"backend_call_duration_seconds_count", map[string]string{"backend": "catalogue", "outcome": "ok"}, "6"},
		{"backend_call_batch_size_sum", map[string]string{"backend": "redis"}, "7"},
		{"backend_call_duration_seconds_count", map[string]string{"backend": "redis", "outcome": "ok"}, "7"},
		{"backend_call_duration_seconds_count", map[string]string{"backend": "catalogue", "outcome": "error"}, ""},
	} {
		if got := telemetrytest.Sample(metrics, c.series, c.labels); got != c.want {
			t.Errorf("%s%v = %q, want %q", c.series, c.labels, got, c.want)
		}
	}
}

var twoDecimals = regexp.MustCompile(`"amount":\d+\.\d\d[,}]`)

func TestListPlansByCountryIsPagedAndCovered(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)

	r := p.get("/v1/plans?country=JP&limit=5", bearer(key))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var list planList
	r.json(t, &list)
	if len(list.Data) == 0 || len(list.Data) > 5 {
		t.Fatalf("%d plans, want 1..5", len(list.Data))
	}
	if pg := list.Pagination; pg.Total <= 0 || pg.Page != 1 || pg.Limit != 5 || pg.HasMore != (pg.Total > 5) {
		t.Fatalf("pagination %+v", pg)
	}
	for _, plan := range list.Data {
		if !slices.Contains(plan.Coverage.Countries, "JP") {
			t.Errorf("plan %s does not cover JP: %v", plan.ID, plan.Coverage.Countries)
		}
		if plan.Price.Currency != "USD" {
			t.Errorf("plan %s priced in %s, want the account's USD", plan.ID, plan.Price.Currency)
		}
	}
	if !twoDecimals.Match(r.body) {
		t.Errorf("amounts must carry two decimals: %s", r.body)
	}
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		if r.header.Get(h) == "" {
			t.Errorf("missing %s header", h)
		}
	}

	// Lower-case codes are accepted, and the next page holds other plans.
	if list.Pagination.HasMore {
		r2 := p.get("/v1/plans?country=jp&limit=5&page=2", bearer(key))
		var page2 planList
		r2.json(t, &page2)
		if r2.status != http.StatusOK || len(page2.Data) == 0 || page2.Pagination.Total != list.Pagination.Total {
			t.Fatalf("page 2: %d %s", r2.status, r2.body)
		}
		for _, a := range page2.Data {
			for _, b := range list.Data {
				if a.ID == b.ID {
					t.Fatalf("plan %s on both pages", a.ID)
				}
			}
		}
	}

	// Every JP plan at once: region is null but on regional plans, which
	// name theirs.
	var whole planList
	p.get("/v1/plans?country=JP&limit=100", bearer(key)).json(t, &whole)
	scopes := map[string]int{}
	for _, plan := range whole.Data {
		scopes[plan.Coverage.Scope]++
		switch region := plan.Coverage.Region; {
		case plan.Coverage.Scope == "region" && (region == nil || *region == ""):
			t.Errorf("regional plan %s names no region", plan.ID)
		case plan.Coverage.Scope != "region" && region != nil:
			t.Errorf("plan %s (%s): region %q, want null", plan.ID, plan.Coverage.Scope, *region)
		}
	}
	if scopes["country"] == 0 || scopes["region"] == 0 || len(whole.Data) != whole.Pagination.Total {
		t.Fatalf("JP on one page: %d of %d plans, scopes %v; want all, country and regional among them", len(whole.Data), whole.Pagination.Total, scopes)
	}

	// A page that ends exactly at the total has no more after it; the one
	// before it has.
	n := whole.Pagination.Total
	for _, tc := range []struct {
		query   string
		hasMore bool
	}{
		{fmt.Sprintf("limit=%d", n), false},
		{fmt.Sprintf("limit=1&page=%d", n), false},
		{fmt.Sprintf("limit=1&page=%d", n-1), true},
	} {
		var page planList
		p.get("/v1/plans?country=JP&"+tc.query, bearer(key)).json(t, &page)
		if page.Pagination.HasMore != tc.hasMore || page.Pagination.Total != n || len(page.Data) == 0 {
			t.Errorf("?country=JP&%s: %d plans, pagination %+v; want has_more %v", tc.query, len(page.Data), page.Pagination, tc.hasMore)
		}
	}
}

func TestListPlansByTypeAndCurrency(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("EUR", accountsv1.Environment_ENVIRONMENT_LIVE)

	r := p.get("/v1/plans?type=per_day&limit=100", bearer(key))
	var list planList
	r.json(t, &list)
	if r.status != http.StatusOK || len(list.Data) == 0 {
		t.Fatalf("status %d, %d plans", r.status, len(list.Data))
	}
	for _, plan := range list.Data {
		if plan.Type != "per_day" || !plan.Data.Unlimited || plan.Data.TotalBytes != nil || plan.ValidityDays != nil {
			t.Errorf("plan %s is not a per-day plan as the contract shows one: %+v", plan.ID, plan)
		}
		if plan.Price.Currency != "EUR" {
			t.Errorf("plan %s priced in %s, want EUR", plan.ID, plan.Price.Currency)
		}
	}

	r = p.get("/v1/plans?type=fixed&limit=100", bearer(key))
	list = planList{}
	r.json(t, &list)
	if r.status != http.StatusOK || len(list.Data) == 0 {
		t.Fatalf("type=fixed: status %d, %d plans", r.status, len(list.Data))
	}
	for _, plan := range list.Data {
		if plan.Type != "fixed" || plan.Data.TotalBytes == nil || plan.ValidityDays == nil {
			t.Errorf("plan %s: %+v, want a fixed plan with bytes and validity", plan.ID, plan)
		}
	}
}

func TestBadQueryParametersNameTheParameter(t *testing.T) {
	p := start(t, options{})
	accountID, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	_ = accountID
	for _, tc := range []struct{ query, field string }{
		{"limit=101", "limit"},
		{"limit=0", "limit"},
		{"limit=abc", "limit"},
		{"page=0", "page"},
		{"page=-3", "page"},
		{"page=10001", "page"},
		// Past int32: must not wrap round to a page that exists.
		{"page=4294967297", "page"},
		{"page=", "page"},
		{"limit=", "limit"},
		{"limit=1&limit=200", "limit"},
		{"country=JP&country=ZZ", "country"},
		// net/url drops what it cannot decode: these must not list all.
		{"country=%zz", "country"},
		{"limit=5&limit=%zz", "limit"},
		{"limit=50&limit=1;", "limit"},
		{"limit=1;page=2", "limit"},
		{"country=ZZZ", "country"},
		{"country=ZZ", "country"},
		{"country=1", "country"},
		{"type=bundle", "type"},
		{"countyr=JP", "countyr"},
		// A parameter with no name, or one that is not UTF-8 text, is named
		// as it was sent.
		{"=5", "=5"},
		{"limit=5&=", "="},
		{"%FF=1", "%FF"},
		{"%ff=1", "%FF"},
		{"\xff=1", "%FF"},
		{"\xff%zz=1", "%FF%25zz"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := p.get("/v1/plans?"+tc.query, bearer(key))
			e := p.expectError(r, http.StatusBadRequest, "invalid_request")
			if len(e.Error.Details) == 0 || e.Error.Details[0].Field != tc.field || e.Error.Details[0].Reason == "" {
				t.Fatalf("details %+v, want the field %q with a reason", e.Error.Details, tc.field)
			}
		})
	}

	// Each reason says what is wanted. An integer is written in plain
	// digits: strconv would take "+2" and "0001", and call a number past
	// int64 an "invalid integer".
	for query, reason := range map[string]string{
		"limit=%2B2":                 "want a whole number from 1 to 100, in digits alone (no sign, point or exponent)",
		"page=0001":                  "want a whole number from 1 to 10000, without leading zeros",
		"limit=1e1":                  "want a whole number from 1 to 100, in digits alone (no sign, point or exponent)",
		"page=-3":                    "want a whole number from 1 to 10000, in digits alone (no sign, point or exponent)",
		"limit=99999999999999999999": "want a whole number from 1 to 100",
		// Every fault reads in one voice, huma's checks included: no
		// "expected number <= 100", and no regular expression.
		"limit=101":   "want a whole number from 1 to 100",
		"limit=0":     "want a whole number from 1 to 100",
		"page=0":      "want a whole number from 1 to 10000",
		"page=10001":  "want a whole number from 1 to 10000",
		"type=bundle": "want one of: fixed, per_day",
		"country=ZZZ": "want an ISO 3166-1 alpha-2 country code, such as JP",
		"country=J1":  "want an ISO 3166-1 alpha-2 country code, such as JP",
		// Well formed but assigned to no country: the catalogue's finding,
		// in the same words.
		"country=ZZ": "want an ISO 3166-1 alpha-2 country code, such as JP",
	} {
		e := p.expectError(p.get("/v1/plans?"+query, bearer(key)), http.StatusBadRequest, "invalid_request")
		if len(e.Error.Details) != 1 || e.Error.Details[0].Reason != reason {
			t.Errorf("?%s: details %+v, want one saying %q", query, e.Error.Details, reason)
		}
	}

	// Parameters without a name are named once, by the first.
	e := p.expectError(p.get("/v1/plans?=1&=2", bearer(key)), http.StatusBadRequest, "invalid_request")
	if len(e.Error.Details) != 1 || e.Error.Details[0].Field != "=1" {
		t.Errorf("?=1&=2: details %+v, want one naming =1", e.Error.Details)
	}

	// Every malformed parameter is named at once, not one per attempt.
	e = p.expectError(p.get("/v1/plans?limit=500&country=ZZZ&page=0", bearer(key)), http.StatusBadRequest, "invalid_request")
	var fields []string
	for _, d := range e.Error.Details {
		fields = append(fields, d.Field)
	}
	slices.Sort(fields)
	if !slices.Equal(fields, []string{"country", "limit", "page"}) {
		t.Fatalf("details name %v, want country, limit and page", fields)
	}
}

// The scheme is case-insensitive (RFC 9110, section 11.1): a client that
// writes "bearer" has sent a valid key.
func TestBearerSchemeInAnyCase(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	for _, scheme := range []string{"bearer", "BEARER", "beaRer"} {
		if r := p.get("/v1/plans?limit=1", scheme+" "+key); r.status != http.StatusOK {
			t.Errorf("%s <key>: %d %s", scheme, r.status, r.body)
		}
	}
}

// RateLimit-Reset is whole seconds rounded up: a client that waits as long
// as it says finds its allowance whole, never a fraction short of it. A
// 3/min key's first request comes back in 20 s; its second, made a moment
// later, in just under 40 s, said as 40.
func TestRateLimitResetRoundsUp(t *testing.T) {
	p := start(t, options{defaultRateLimit: 3})
	// The second request must follow the first within a second for "40" to
	// be the rounded-up figure; a stalled machine gets another key.
	for attempt := 1; ; attempt++ {
		_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
		first := p.get("/v1/plans?limit=1", bearer(key))
		sent := time.Now()
		second := p.get("/v1/plans?limit=1", bearer(key))
		if time.Since(sent) > 900*time.Millisecond && attempt < 3 {
			continue
		}
		for i, tc := range []struct {
			r    response
			want string
		}{{first, "20"}, {second, "40"}} {
			if got := tc.r.header.Get("RateLimit-Reset"); tc.r.status != http.StatusOK || got != tc.want {
				t.Errorf("request %d: %d, RateLimit-Reset %q, want %q", i+1, tc.r.status, got, tc.want)
			}
		}
		return
	}
}

func TestUnauthorizedRequests(t *testing.T) {
	p := start(t, options{})
	for name, auth := range map[string]string{
		"no header":        "",
		"nonsense":         "Bearer nonsense",
		"wrong scheme":     "Basic c2tfc2FuZGJveF94",
		"empty bearer":     "Bearer ",
		"well-formed fake": "Bearer sk_live_0123456789abcdefghijABCDEFGHIJ0123456789ab",
	} {
		t.Run(name, func(t *testing.T) {
			r := p.get("/v1/plans", auth)
			p.expectError(r, http.StatusUnauthorized, "unauthorized")
			if r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			// Written as huma writes its own errors: "<" as itself.
			if !strings.Contains(string(r.body), "Bearer <API_KEY>") {
				t.Errorf("body %s does not show Bearer <API_KEY> as written", r.body)
			}
		})
	}
}

// Whoever can write to the gateway's Redis can place an auth cache entry
// under any key they make up. Such an entry must not authenticate: sealed
// with another secret, unsealed, or a genuine entry copied from a real
// key's slot, the made-up key is checked with accounts, which refuses it.
func TestAuthCacheEntriesFromOutsideDoNotAuthenticate(t *testing.T) {
	p := start(t, options{})
	ctx := context.Background()
	accountID, keyID, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_LIVE)
	rdb, genuine := p.cachedEntry(key)
	victim, err := json.Marshal(gateway.Principal{AccountID: accountID, Environment: gateway.Live, KeyID: keyID, Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	for name, entry := range map[string]string{
		"unsealed principal":     string(victim),
		"genuine entry, moved":   genuine,
		"sealed with a guess":    "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA." + string(victim),
		"genuine seal, new body": genuine[:strings.LastIndex(genuine, ".")+1] + string(victim),
	} {
		madeUp := "sk_live_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		if err := rdb.Set(ctx, authSlot(madeUp), entry, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if r := p.get("/v1/plans?limit=1", bearer(madeUp)); r.status != http.StatusUnauthorized {
			t.Errorf("%s: a made-up key got %d, want 401", name, r.status)
		}
	}
}

// Whoever can write to Redis could keep a revoked key's genuine entry
// there for good, written again and again with no TTL. It still stops
// working in time: the entry's deadline is sealed inside it.
func TestRevokedKeyStopsWhenRedisKeepsItsEntry(t *testing.T) {
	p := start(t, options{authCacheTTL: time.Second})
	ctx := context.Background()
	accountID, keyID, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_LIVE)
	rdb, genuine := p.cachedEntry(key)
	if _, err := p.accounts.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: accountID, KeyId: keyID}); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	for {
		if err := rdb.Set(ctx, authSlot(key), genuine, 0).Err(); err != nil {
			t.Fatal(err)
		}
		sent := time.Since(revokedAt)
		r := p.get("/v1/plans?limit=1", bearer(key))
		if r.status == http.StatusUnauthorized {
			break
		}
		if sent > 5*time.Second {
			t.Fatalf("the revoked key still answered %d %s after revocation, its entry kept in Redis", r.status, sent.Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := rdb.Del(ctx, authSlot(key)).Err(); err != nil {
		t.Fatal(err)
	}
}

// cachedEntry makes one request with key, which leaves the gateway's
// sealed entry for it in Redis, and returns that entry and a client of the
// Redis, for doing to it what an intruder could.
func (p *platform) cachedEntry(key string) (*goredis.Client, string) {
	p.t.Helper()
	if r := p.get("/v1/plans?limit=1", bearer(key)); r.status != http.StatusOK {
		p.t.Fatalf("the genuine key: %d %s", r.status, r.body)
	}
	opts, err := goredis.ParseURL(redistest.URL())
	if err != nil {
		p.t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	p.t.Cleanup(func() { rdb.Close() })
	entry, err := rdb.Get(context.Background(), authSlot(key)).Result()
	if err != nil {
		p.t.Fatalf("the key's cache entry: %v", err)
	}
	return rdb, entry
}

// authSlot is where the gateway caches what it learnt of key.
func authSlot(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "gw:auth:" + hex.EncodeToString(sum[:])
}

// TestAccountsDownIsAnInternalErrorNotAChallenge: a key the gateway cannot
// check is the platform's fault. Challenging the partner for credentials
// (WWW-Authenticate) would tell a client library to drop a valid key.
func TestAccountsDownIsAnInternalErrorNotAChallenge(t *testing.T) {
	p := start(t, options{accountsURL: "http://127.0.0.1:1"})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	r := p.get("/v1/plans?limit=1", bearer(key))
	p.expectError(r, http.StatusInternalServerError, "internal_error")
	if got := r.header.Get("WWW-Authenticate"); got != "" {
		t.Fatalf("500 carries WWW-Authenticate %q", got)
	}
}

// With two replicas the worst case is longer than with one: a replica
// that first meets the key just before the shared cache's entry expires
// caches that answer in its own layer. Revocation must still land within
// 5 s there, at the longest AUTH_CACHE_TTL.
func TestRevokedKeyStopsWorkingWithinFiveSecondsOnEveryReplica(t *testing.T) {
	const ttl = 3 * time.Second
	p := start(t, options{authCacheTTL: ttl})
	other := p.replica()
	accountID, keyID, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	const path = "/v1/plans?limit=1"
	getOther := func() response {
		req, _ := http.NewRequest(http.MethodGet, other+path, nil)
		req.Header.Set("Authorization", bearer(key))
		return p.send(req)
	}

	// The first replica puts the key's answer in the shared cache...
	warmed := time.Now()
	if r := p.get(path, bearer(key)); r.status != http.StatusOK {
		t.Fatalf("before revoke: %d %s", r.status, r.body)
	}
	if _, err := p.accounts.RevokeKey(context.Background(), &accountsv1.RevokeKeyRequest{AccountId: accountID, KeyId: keyID}); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	// ...and the other first meets the key just before that entry expires.
	time.Sleep(time.Until(warmed.Add(ttl - 200*time.Millisecond)))
	getOther()
	for {
		// Judged by when the request was sent, not answered: a slow
		// answer on a loaded machine is not a late revocation.
		sent := time.Since(revokedAt)
		r := getOther()
		if r.status == http.StatusUnauthorized {
			p.expectError(r, http.StatusUnauthorized, "unauthorized")
			t.Logf("revoked key refused by the other replica %s after revocation", sent.Round(time.Millisecond))
			return
		}
		if sent > 5*time.Second {
			t.Fatalf("revoked key still answered %d on the other replica %s after revocation", r.status, sent.Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRevokedKeyStopsWorkingWithinFiveSeconds(t *testing.T) {
	// At the longest auth cache AUTH_CACHE_TTL allows: the promise must
	// hold for every setting an operator can make.
	p := start(t, options{authCacheTTL: 3 * time.Second})
	accountID, keyID, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)

	// Warm the auth cache, so the revocation has to beat a cached answer.
	if r := p.get("/v1/plans?limit=1", bearer(key)); r.status != http.StatusOK {
		t.Fatalf("before revoke: %d %s", r.status, r.body)
	}
	if _, err := p.accounts.RevokeKey(context.Background(), &accountsv1.RevokeKeyRequest{AccountId: accountID, KeyId: keyID}); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	for {
		r := p.get("/v1/plans?limit=1", bearer(key))
		if r.status == http.StatusUnauthorized {
			p.expectError(r, http.StatusUnauthorized, "unauthorized")
			break
		}
		if time.Since(revokedAt) > 5*time.Second {
			t.Fatalf("revoked key still answered %d after 5 s", r.status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPlanByID(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("GBP", accountsv1.Environment_ENVIRONMENT_SANDBOX)

	var list planList
	p.get("/v1/plans?country=JP&limit=1", bearer(key)).json(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("no JP plan to fetch")
	}
	id := list.Data[0].ID

	r := p.get("/v1/plans/"+id, bearer(key))
	var one struct{ Data planJSON }
	r.json(t, &one)
	if r.status != http.StatusOK || one.Data.ID != id || one.Data.Price.Currency != "GBP" {
		t.Fatalf("status %d: %s", r.status, r.body)
	}

	// Retired: gone from GET /plans/{id} and from the list.
	if _, err := p.catalogue.RetirePlan(context.Background(), &cataloguev1.RetirePlanRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	p.expectError(p.get("/v1/plans/"+id, bearer(key)), http.StatusNotFound, "not_found")
	var after planList
	p.get("/v1/plans?country=JP&limit=100", bearer(key)).json(t, &after)
	for _, plan := range after.Data {
		if plan.ID == id {
			t.Fatal("retired plan still listed")
		}
	}
	if after.Pagination.Total != list.Pagination.Total-1 {
		t.Fatalf("total %d after retiring one of %d", after.Pagination.Total, list.Pagination.Total)
	}

	for _, bad := range []string{"0190b7a4-0000-7000-8000-000000000000", "not-a-uuid", "123", url.PathEscape("'; DROP TABLE plans; --")} {
		p.expectError(p.get("/v1/plans/"+bad, bearer(key)), http.StatusNotFound, "not_found")
	}

	// A plan has one URL: other spellings of its id that uuid.Parse
	// accepts name nothing. Case is not spelling.
	other := list.Data[0]
	p.get("/v1/plans?country=FR&limit=1", bearer(key)).json(t, &list)
	live := list.Data[0].ID
	if other.ID == live {
		t.Fatal("the FR plan is the retired JP plan")
	}
	for _, spelling := range []string{"{" + live + "}", "urn:uuid:" + live, strings.ReplaceAll(live, "-", "")} {
		p.expectError(p.get("/v1/plans/"+url.PathEscape(spelling), bearer(key)), http.StatusNotFound, "not_found")
	}
	if r := p.get("/v1/plans/"+strings.ToUpper(live), bearer(key)); r.status != http.StatusOK {
		t.Fatalf("upper-case id: %d %s", r.status, r.body)
	}
}

func TestRateLimitPerKey(t *testing.T) {
	p := start(t, options{})
	accountID, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	if _, err := p.accounts.SetRateLimit(context.Background(), &accountsv1.SetRateLimitRequest{AccountId: accountID, RateLimitPerMinute: 3}); err != nil {
		t.Fatal(err)
	}
	// The account's limit reaches the gateway with the next authentication;
	// a fresh key avoids waiting for the cached one to expire.
	k, err := p.accounts.CreateKey(context.Background(), &accountsv1.CreateKeyRequest{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX})
	if err != nil {
		t.Fatal(err)
	}
	_ = key
	for i := range 3 {
		r := p.get("/v1/plans?limit=1", bearer(k.GetSecret()))
		if r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
		}
		if got, want := r.header.Get("RateLimit-Remaining"), fmt.Sprint(2-i); got != want || r.header.Get("RateLimit-Limit") != "3" {
			t.Fatalf("request %d: RateLimit-Limit %s Remaining %s, want 3 and %s", i+1, r.header.Get("RateLimit-Limit"), got, want)
		}
	}
	r := p.get("/v1/plans?limit=1", bearer(k.GetSecret()))
	p.expectError(r, http.StatusTooManyRequests, "rate_limited")
	if r.header.Get("Retry-After") != "60" || r.header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("Retry-After %q Remaining %q", r.header.Get("Retry-After"), r.header.Get("RateLimit-Remaining"))
	}
}

func TestDefaultRateLimitAndRedisOutage(t *testing.T) {
	for name, redis := range map[string]string{"redis up": "", "redis down": "redis://127.0.0.1:1/0"} {
		t.Run(name, func(t *testing.T) {
			p := start(t, options{redisURL: redis, defaultRateLimit: 2})
			_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
			for i := range 2 {
				if r := p.get("/v1/plans?limit=1", bearer(key)); r.status != http.StatusOK {
					t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
				}
			}
			r := p.get("/v1/plans?limit=1", bearer(key))
			p.expectError(r, http.StatusTooManyRequests, "rate_limited")
			if r.header.Get("Retry-After") != "60" {
				t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
			}
		})
	}
}

func TestOpenAPIDocumentListsExactlyTheImplementedEndpoints(t *testing.T) {
	p := start(t, options{})
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(p.spec, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	var got []string
	for path, ops := range doc.Paths {
		for method := range ops {
			got = append(got, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(got)
	// HEAD is served beside every GET (net/http's ServeMux does), so it is
	// documented too.
	// Twelve endpoints, DESIGN.md's: HEAD beside a GET is not another.
	want := []string{"GET /balance", "GET /esims", "GET /esims/{id}", "GET /events", "GET /openapi.json", "GET /orders", "GET /orders/{id}", "GET /plans", "GET /plans/{id}",
		"HEAD /balance", "HEAD /esims", "HEAD /esims/{id}", "HEAD /events", "HEAD /openapi.json", "HEAD /orders", "HEAD /orders/{id}", "HEAD /plans", "HEAD /plans/{id}",
		"POST /esims/{id}/topups", "POST /orders", "POST /sandbox/esims/{id}/simulate"}
	if !slices.Equal(got, want) {
		t.Fatalf("documented %v, want %v", got, want)
	}
	// The document promises only what the API does: no 422 (invalid input
	// is 400), no rate-limit headers on a 401 (no key, no allowance), and
	// no null where an empty list is sent.
	if strings.Contains(string(p.spec), `"422"`) {
		t.Error("document mentions 422")
	}
	if strings.Contains(string(p.spec), `["array","null"]`) {
		t.Error("document allows null for a list")
	}
	// OpenAPI says a response header named Content-Type "SHALL be ignored".
	if strings.Contains(string(p.spec), `"Content-Type"`) {
		t.Error("document lists a Content-Type response header")
	}
	// What code generators read: money as a double (a bare number becomes
	// a float32 in Go's oapi-codegen), the public document declared
	// public, Request-Id on every answer, each error status saying its
	// code, and the bearer scheme named as such.
	var gen struct {
		Paths map[string]map[string]struct {
			Security  *[]json.RawMessage `json:"security"`
			Responses map[string]struct {
				Description string `json:"description"`
				Headers     map[string]struct {
					Required bool `json:"required"`
				} `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas         map[string]json.RawMessage `json:"schemas"`
			SecuritySchemes map[string]struct {
				Scheme       string `json:"scheme"`
				BearerFormat string `json:"bearerFormat"`
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(p.spec, &gen); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gen.Components.Schemas["Price"]), `"format":"double"`) {
		t.Errorf("Price: %s, want the amount as a double", gen.Components.Schemas["Price"])
	}
	if s := gen.Components.SecuritySchemes["bearerAuth"]; s.Scheme != "bearer" || s.BearerFormat == "" {
		t.Errorf("security schemes %+v, want bearerAuth with a bearer format", gen.Components.SecuritySchemes)
	}
	for _, method := range []string{"get", "head"} {
		if sec := gen.Paths["/openapi.json"][method].Security; sec == nil || len(*sec) != 0 {
			t.Errorf("%s /openapi.json: security %v, want declared empty", method, sec)
		}
	}
	codes := map[string]string{"400": "`invalid_request`", "401": "`unauthorized`", "404": "`not_found`", "429": "`rate_limited`", "500": "`internal_error`"}
	for path, ops := range gen.Paths {
		for method, op := range ops {
			for status, resp := range op.Responses {
				if !resp.Headers["Request-Id"].Required {
					t.Errorf("%s %s %s: Request-Id not required", method, path, status)
				}
				if code, ok := codes[status]; ok && !strings.HasPrefix(resp.Description, code) {
					t.Errorf("%s %s %s: description %q, want it to start with %s", method, path, status, resp.Description, code)
				}
			}
		}
	}
	var plans documentedHeaders
	if err := json.Unmarshal(p.spec, &plans); err != nil {
		t.Fatal(err)
	}
	for status, resp := range plans.Paths["/plans"]["get"].Responses {
		_, documented := resp.Headers["RateLimit-Remaining"]
		if documented != (status != "401") {
			t.Errorf("GET /plans %s: RateLimit-Remaining documented %v", status, documented)
		}
	}

	// Each documented endpoint answers (none is a paper route).
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	plan := "/v1/plans/" + p.firstPlanID(key, "limit=1")
	for _, path := range []string{"/v1/openapi.json", "/v1/plans", plan} {
		get := p.get(path, bearer(key))
		if get.status != http.StatusOK {
			t.Errorf("%s: %d", path, get.status)
		}
		// HEAD: the GET's status and headers, no body.
		req, _ := http.NewRequest(http.MethodHead, p.gateway+path, nil)
		req.Header.Set("Authorization", bearer(key))
		head := p.send(req)
		if head.status != get.status || len(head.body) != 0 || head.header.Get("Content-Type") != get.header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d, Content-Type %q, %d-byte body; GET: %d, %q", path, head.status, head.header.Get("Content-Type"), len(head.body), get.status, get.header.Get("Content-Type"))
		}
	}
}

func TestAnswersAreApplicationJSONWhateverTheAccept(t *testing.T) {
	p := start(t, options{})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	for _, accept := range []string{"", "json", "application/xml", "*/*", "application/json"} {
		for _, path := range []string{"/v1/plans?limit=1", "/v1/plans?limit=0"} {
			req, _ := http.NewRequest(http.MethodGet, p.gateway+path, nil)
			req.Header.Set("Authorization", bearer(key))
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Accept %q, %s: Content-Type %q", accept, path, ct)
			}
		}
	}
}

func TestRequestIDsAreOursAndUnknownRoutesAnswerJSON(t *testing.T) {
	p := start(t, options{})
	req, _ := http.NewRequest(http.MethodGet, p.gateway+"/v1/plans", nil)
	req.Header.Set("Request-Id", "spoofed")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id := resp.Header.Get("Request-Id"); id == "spoofed" || !strings.HasPrefix(id, "req_") {
		t.Fatalf("Request-Id %q: the gateway must issue its own", id)
	}
	seen := map[string]bool{}
	for _, path := range []string{"/v1/nope", "/", "/v2/plans"} {
		r := p.get(path, "")
		e := p.expectError(r, http.StatusNotFound, "not_found")
		if !strings.Contains(e.Error.Message, "GET "+path) {
			t.Errorf("message %q should name the request", e.Error.Message)
		}
		if seen[e.Error.RequestID] {
			t.Fatal("request ids repeat")
		}
		seen[e.Error.RequestID] = true
	}
}

// TestOneTraceSpansGatewayTwirpServicesAndPostgres: one request is one
// trace, and each hop is a child of the one that called it: the gateway's
// span is the root, each service's span a child of the gateway's Twirp
// client span, and each query a descendant of the service's span. A key
// the gateway has not seen yet puts accounts on the path as well.
func TestOneTraceSpansGatewayTwirpServicesAndPostgres(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	p := start(t, options{spans: spans})
	_, _, key := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)
	planID := p.firstPlanID(key, "limit=1")
	_, _, unseen := p.account("USD", accountsv1.Environment_ENVIRONMENT_SANDBOX)

	spans.Reset()
	r := p.get("/v1/plans/"+planID, bearer(unseen))
	if r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	all := spans.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var names []string
	for _, s := range all {
		byID[s.SpanContext.SpanID()] = s
		names = append(names, s.InstrumentationScope.Name+" "+s.Name)
		if s.SpanContext.TraceID() != all[0].SpanContext.TraceID() {
			t.Fatalf("one request made more than one trace:\n%s", strings.Join(names, "\n"))
		}
	}
	named := func(scope, name string) []tracetest.SpanStub {
		var found []tracetest.SpanStub
		for _, s := range all {
			if strings.Contains(s.InstrumentationScope.Name, scope) && s.Name == name {
				found = append(found, s)
			}
		}
		if len(found) == 0 {
			t.Fatalf("no %s span %q in the trace:\n%s", scope, name, strings.Join(names, "\n"))
		}
		return found
	}
	parent := func(s tracetest.SpanStub) (tracetest.SpanStub, bool) {
		p, ok := byID[s.Parent.SpanID()]
		return p, ok && s.Parent.IsValid()
	}
	descends := func(s, from tracetest.SpanStub) bool {
		for p, ok := parent(s); ok; p, ok = parent(p) {
			if p.SpanContext.SpanID() == from.SpanContext.SpanID() {
				return true
			}
		}
		return false
	}

	gw := named("otelhttp", "GET /v1/plans/{id}")[0]
	if gw.Parent.IsValid() {
		t.Errorf("the gateway's span has a parent (%s); the public span must be the root", gw.Parent.SpanID())
	}
	for _, method := range []string{"esim.accounts.v1.Accounts/Authenticate", "esim.catalogue.v1.Catalogue/GetPlans"} {
		svc := named("otelhttp", "POST /twirp/"+method)[0]
		client, ok := parent(svc)
		if !ok || client.SpanKind != trace.SpanKindClient || client.Name != svc.Name || !descends(client, gw) {
			t.Errorf("%s: its parent is %q, want the gateway's Twirp client span under %q", method, client.Name, gw.Name)
		}
		queried := false
		for _, q := range named("otelpgx", "SELECT") {
			queried = queried || descends(q, svc)
		}
		if !queried {
			t.Errorf("%s: no query span below the service's span", method)
		}
	}
}

func TestWrongMethodIsAnUnrecognizedRequest(t *testing.T) {
	p := start(t, options{})
	resp, err := http.Post(p.gateway+"/v1/plans", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header, body: body}
	e := p.expectError(r, http.StatusNotFound, "not_found")
	if !strings.Contains(e.Error.Message, "POST /v1/plans") {
		t.Fatalf("message %q should name the request", e.Error.Message)
	}
}

// /metrics is not the handler's: ListenAndServe serves it, where
// METRICS_ADDR says (cmd/gateway's tests).
func TestProbes(t *testing.T) {
	p := start(t, options{})
	for _, path := range []string{"/healthz", "/readyz"} {
		req, _ := http.NewRequest(http.MethodGet, p.gateway+path, nil)
		status, header, body := httpservertest.Exchange(t, req)
		if status != http.StatusOK || header.Get("Request-Id") == "" {
			t.Errorf("%s: %d, Request-Id %q, %.200s", path, status, header.Get("Request-Id"), body)
		}
	}
}
