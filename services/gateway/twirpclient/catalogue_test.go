package twirpclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/catalogue"
	catalogueserver "github.com/esimplatform/esim/services/catalogue/server"
	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/twirpclient"
)

// gatedCatalogue is a real, seeded catalogue server whose GetPlans calls
// can be held at the door, so a test can fill the gateway's queue before
// any call completes. It counts the GetPlans calls it serves.
type gatedCatalogue struct {
	url     string
	admin   cataloguev1.Catalogue
	calls   atomic.Int64
	arrived chan struct{}
	mu      sync.Mutex
	gate    chan struct{}
}

func startCatalogue(t *testing.T) *gatedCatalogue {
	t.Helper()
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "test", telemetry.Config{LogLevel: "error"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalogueserver.New(ctx, catalogueserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), SeedCatalogue: true, Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	g := &gatedCatalogue{arrived: make(chan struct{}, 1000)}
	h := cat.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/GetPlans") {
			g.calls.Add(1)
			g.arrived <- struct{}{}
			g.mu.Lock()
			gate := g.gate
			g.mu.Unlock()
			if gate != nil {
				<-gate
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	g.admin = cataloguev1.NewCatalogueProtobufClient(srv.URL, internalauthtest.Client(internalauth.Operator))
	return g
}

func (g *gatedCatalogue) hold() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	return g.gate
}

// TestConcurrentPlanLookupsShareCatalogueCalls: lookups made while the
// catalogue is busy go out together, and each still gets its own answer:
// its plan in its currency, or not found.
func TestConcurrentPlanLookupsShareCatalogueCalls(t *testing.T) {
	cat := startCatalogue(t)
	ctx := context.Background()
	retired := catalogue.SeedPlanID("fr-unlimited-day").String()
	if _, err := cat.admin.RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: retired}); err != nil {
		t.Fatal(err)
	}
	client := twirpclient.NewCatalogue(cat.url, internalauthtest.As(&http.Client{Timeout: 10 * time.Second}, internalauth.Gateway), 10*time.Second, nil)

	// Idle: one lookup, one call of its own.
	jp := catalogue.SeedPlanID("jp-unlimited-day").String()
	if p, err := client.GetPlan(ctx, jp, "EUR"); err != nil || p.ID != jp || p.Currency != "EUR" || p.PriceMinor <= 0 {
		t.Fatalf("GetPlan idle: %+v, %v", p, err)
	}
	if n := cat.calls.Load(); n != 1 {
		t.Fatalf("one idle lookup made %d calls", n)
	}
	<-cat.arrived

	// Busy: hold the calls in flight, queue more lookups behind them.
	seeds := catalogue.SeedPlans()
	gate := cat.hold()
	type answer struct {
		want string // plan id, or "" for not found
		got  gateway.Plan
		err  error
	}
	const lookups = 60
	answers := make([]answer, lookups)
	var wg sync.WaitGroup
	lookup := func(i int) {
		defer wg.Done()
		id := seeds[i].ID.String()
		answers[i].want = id
		if id == retired {
			answers[i].want = ""
		}
		switch i % 10 {
		case 3:
			id, answers[i].want = retired, ""
		case 7:
			id, answers[i].want = "0190d3f0-0000-7000-8000-0000000000ff", ""
		}
		currency := []string{"USD", "EUR", "GBP"}[i%3]
		answers[i].got, answers[i].err = client.GetPlan(ctx, id, currency)
		if answers[i].err == nil && answers[i].got.Currency != currency {
			answers[i].err = errors.New("priced in " + answers[i].got.Currency + ", want " + currency)
		}
	}
	// The first lookups take every slot and stop at the door...
	for i := range twirpclient.PlanCallsInFlight {
		wg.Add(1)
		go lookup(i)
		<-cat.arrived
	}
	// ...so these queue: nothing can go out until the door opens.
	for i := twirpclient.PlanCallsInFlight; i < lookups; i++ {
		wg.Add(1)
		go lookup(i)
	}
	time.Sleep(200 * time.Millisecond) // let them reach the queue
	close(gate)
	wg.Wait()

	for i, a := range answers {
		switch {
		case a.want == "" && !errors.Is(a.err, gateway.ErrNotFound):
			t.Errorf("lookup %d: %+v, %v; want not found", i, a.got, a.err)
		case a.want != "" && (a.err != nil || a.got.ID != a.want):
			t.Errorf("lookup %d: %+v, %v; want plan %s", i, a.got, a.err, a.want)
		}
	}
	// 1 idle call, the held calls, then the queued lookups in one call (or
	// a few, had some not queued before the door opened).
	if calls := cat.calls.Load(); calls > 1+twirpclient.PlanCallsInFlight+3 {
		t.Fatalf("%d lookups made %d catalogue calls: not coalesced", lookups+1, calls)
	}
}

// TestCatalogueFailureFailsEveryLookupOfTheCall: a failed call is an
// internal error for each lookup it carried, never a not-found.
func TestCatalogueFailureFailsEveryLookupOfTheCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream exploded", http.StatusBadGateway)
	}))
	defer srv.Close()
	client := twirpclient.NewCatalogue(srv.URL, srv.Client(), 10*time.Second, nil)
	_, err := client.GetPlan(context.Background(), catalogue.SeedPlanID("jp-unlimited-day").String(), "USD")
	if err == nil || errors.Is(err, gateway.ErrNotFound) || errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("err = %v, want an internal error", err)
	}
}

// TestLookupsQueuedBehindAHungCatalogueGiveUpOnTheirOwn: with every call
// slot held by a catalogue that does not answer, each lookup gives up at
// its own timeout, instead of waiting for a slot and then for a call of
// its own.
func TestLookupsQueuedBehindAHungCatalogueGiveUpOnTheirOwn(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	// Calls have no timeout of their own: only the lookups' ends them.
	client := twirpclient.NewCatalogue(srv.URL, &http.Client{}, 200*time.Millisecond, nil)
	const lookups = 20
	errs := make(chan error, lookups)
	for range lookups {
		go func() {
			_, err := client.GetPlan(context.Background(), catalogue.SeedPlanID("jp-unlimited-day").String(), "USD")
			errs <- err
		}()
	}
	for range lookups {
		select {
		case err := <-errs:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("lookup: %v, want its own timeout", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("lookups still waiting 30s after their 200ms timeout")
		}
	}
}

// TestSharedCallLinksEveryCallersSpan: each lookup that went out in a
// shared call can find that call from its own trace: the call's span links
// every caller's span, and sits in the first caller's trace.
func TestSharedCallLinksEveryCallersSpan(t *testing.T) {
	cat := startCatalogue(t)
	spans := tracetest.NewInMemoryExporter()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)).Tracer("test")
	client := twirpclient.NewCatalogue(cat.url, internalauthtest.As(&http.Client{Timeout: 10 * time.Second}, internalauth.Gateway), 10*time.Second, nil)
	id := catalogue.SeedPlanID("jp-unlimited-day").String()

	gate := cat.hold()
	var wg sync.WaitGroup
	callers := make(chan trace.SpanContext, 100)
	lookup := func() {
		defer wg.Done()
		ctx, span := tracer.Start(context.Background(), "caller")
		defer span.End()
		callers <- span.SpanContext()
		if _, err := client.GetPlan(ctx, id, "USD"); err != nil {
			t.Error(err)
		}
	}
	// The first lookups take every slot and wait at the door; the rest queue.
	for range twirpclient.PlanCallsInFlight {
		wg.Add(1)
		go lookup()
		<-cat.arrived
	}
	alone := map[trace.SpanID]bool{}
	for range twirpclient.PlanCallsInFlight {
		alone[(<-callers).SpanID()] = true
	}
	const queued = 20
	for range queued {
		wg.Add(1)
		go lookup()
	}
	time.Sleep(200 * time.Millisecond)
	close(gate)
	wg.Wait()
	close(callers)

	linked := map[trace.SpanID]bool{}
	for _, s := range spans.GetSpans() {
		if s.Name != twirpclient.CoalescedGetPlansSpan {
			continue
		}
		inBatch := map[trace.SpanID]bool{}
		for _, l := range s.Links {
			inBatch[l.SpanContext.SpanID()] = true
			linked[l.SpanContext.SpanID()] = true
		}
		if !inBatch[s.Parent.SpanID()] || s.SpanContext.TraceID() != s.Parent.TraceID() {
			t.Errorf("shared call's span is not in the trace of a caller it serves (parent %s)", s.Parent.SpanID())
		}
	}
	for c := range callers {
		if !linked[c.SpanID()] {
			t.Errorf("queued lookup %s is linked from no shared call", c.SpanID())
		}
	}
	for id := range alone {
		if linked[id] {
			t.Errorf("lookup %s went out alone, yet a shared call links it", id)
		}
	}
}

// An account is billed in one currency and looks plans up in it; the
// catalogue prices every plan in each of its currencies. The two sets are
// the two services' own and must stay equal, or partners billed in a
// currency one side lacks see no plans (or plans nobody can buy).
func TestAccountAndCatalogueCurrenciesAreTheSame(t *testing.T) {
	var billed, priced []string
	for _, c := range accounts.Currencies {
		billed = append(billed, string(c))
	}
	for _, c := range catalogue.Currencies {
		priced = append(priced, string(c))
	}
	slices.Sort(billed)
	slices.Sort(priced)
	if !slices.Equal(billed, priced) {
		t.Fatalf("accounts bill in %v, the catalogue prices in %v", billed, priced)
	}
}

// Each lookup answers the plan's price in the currency asked for, whatever
// order the catalogue lists its prices in: the label is the request's, so
// only the amount shows a mix-up.
func TestGetPlanPricesInTheAskedCurrency(t *testing.T) {
	cat := startCatalogue(t)
	ctx := context.Background()
	client := twirpclient.NewCatalogue(cat.url, internalauthtest.As(&http.Client{Timeout: 10 * time.Second}, internalauth.Gateway), 10*time.Second, nil)
	for _, slug := range []string{"jp-unlimited-day", "jp-1gb-7d", "fr-5gb-30d"} {
		id := catalogue.SeedPlanID(slug).String()
		plan, err := cat.admin.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id})
		if err != nil {
			t.Fatalf("%s: %v", slug, err)
		}
		if len(plan.GetPrices()) != 3 {
			t.Fatalf("%s: %d prices, want 3", slug, len(plan.GetPrices()))
		}
		for _, price := range plan.GetPrices() {
			got, err := client.GetPlan(ctx, id, price.GetCurrency())
			if err != nil || got.PriceMinor != price.GetAmountMinor() || got.Currency != price.GetCurrency() {
				t.Errorf("%s in %s: %d %s (%v), want %d", slug, price.GetCurrency(), got.PriceMinor, got.Currency, err, price.GetAmountMinor())
			}
		}
	}
}

// newerCatalogue answers as a catalogue a version ahead might: its one plan
// has a type, scope or status this gateway's contract does not name.
type newerCatalogue struct {
	cataloguev1.Catalogue // any other method panics: the test calls none
	plan                  *cataloguev1.Plan
}

func (n newerCatalogue) GetPlans(context.Context, *cataloguev1.GetPlansRequest) (*cataloguev1.GetPlansResponse, error) {
	return &cataloguev1.GetPlansResponse{Plans: []*cataloguev1.Plan{n.plan}}, nil
}

func (n newerCatalogue) ListPlans(context.Context, *cataloguev1.ListPlansRequest) (*cataloguev1.ListPlansResponse, error) {
	return &cataloguev1.ListPlansResponse{Plans: []*cataloguev1.Plan{n.plan}, Total: 1}, nil
}

// TestPlanWithAnUnknownEnumIsAnError: a type, scope or status the gateway
// does not know is an internal error, for a lookup and in a list, never a
// plan whose "type" partners would read as "7".
func TestPlanWithAnUnknownEnumIsAnError(t *testing.T) {
	id := catalogue.SeedPlanID("jp-unlimited-day").String()
	known := func() *cataloguev1.Plan {
		return &cataloguev1.Plan{Id: id, Name: "Japan", Type: cataloguev1.PlanType_PLAN_TYPE_FIXED, Scope: cataloguev1.CoverageScope_COVERAGE_SCOPE_COUNTRY,
			Countries: []string{"JP"}, TotalBytes: 1 << 30, ValidityDays: 7, Status: cataloguev1.PlanStatus_PLAN_STATUS_ACTIVE,
			Prices: []*cataloguev1.Money{{AmountMinor: 500, Currency: "USD"}}}
	}
	serve := func(p *cataloguev1.Plan) *twirpclient.Catalogue {
		srv := httptest.NewServer(cataloguev1.NewCatalogueServer(newerCatalogue{plan: p}))
		t.Cleanup(srv.Close)
		return twirpclient.NewCatalogue(srv.URL, srv.Client(), 10*time.Second, nil)
	}
	ctx := context.Background()
	// The same plan with every value known passes, so what fails below is
	// the unknown value alone.
	if got, err := serve(known()).GetPlan(ctx, id, "USD"); err != nil || got.Type != gateway.Fixed || got.Scope != "country" || got.Status != "active" {
		t.Fatalf("known plan: %+v, %v", got, err)
	}
	for name, change := range map[string]func(*cataloguev1.Plan){
		"type":    func(p *cataloguev1.Plan) { p.Type = 7 },
		"scope":   func(p *cataloguev1.Plan) { p.Scope = 7 },
		"status":  func(p *cataloguev1.Plan) { p.Status = 7 },
		"no type": func(p *cataloguev1.Plan) { p.Type = cataloguev1.PlanType_PLAN_TYPE_UNSPECIFIED },
	} {
		p := known()
		change(p)
		client := serve(p)
		got, err := client.GetPlan(ctx, id, "USD")
		if err == nil || errors.Is(err, gateway.ErrNotFound) || !strings.Contains(err.Error(), "this gateway knows only") {
			t.Errorf("%s: GetPlan = %+v, %v; want an internal error", name, got, err)
		}
		list, _, err := client.ListPlans(ctx, gateway.PlanQuery{Currency: "USD", Page: 1, Limit: 10})
		if err == nil || !strings.Contains(err.Error(), "this gateway knows only") {
			t.Errorf("%s: ListPlans = %+v, %v; want an internal error", name, list, err)
		}
	}
}
