package twirpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/catalogue/postgres"
	"github.com/esimplatform/esim/services/catalogue/twirpserver"
)

type fixture struct {
	client cataloguev1.Catalogue
	pool   *pgxpool.Pool
	logs   *telemetrytest.LogBuffer
}

// wantNoInternalError fails the test if what (a caller's mistake, say) was
// logged as the catalogue's own failure.
func (f fixture) wantNoInternalError(t *testing.T, what string) {
	t.Helper()
	if strings.Contains(f.logs.String(), "twirp internal error") {
		t.Fatalf("%s was logged as an internal error:\n%s", what, f.logs)
	}
}

// newFixture serves a seeded catalogue over real HTTP on a fresh database
// and returns the generated protobuf client for it.
func newFixture(t *testing.T) fixture { return newFixtureWithContext(t, nil) }

func wantCode(t *testing.T, err error, code twirp.ErrorCode) twirp.Error {
	t.Helper()
	var twerr twirp.Error
	if !errors.As(err, &twerr) {
		t.Fatalf("err = %v, want a Twirp %s error", err, code)
	}
	if twerr.Code() != code {
		t.Fatalf("code %s (%s), want %s", twerr.Code(), twerr.Msg(), code)
	}
	return twerr
}

func wantInvalidArgument(t *testing.T, err error, field string) {
	t.Helper()
	twerr := wantCode(t, err, twirp.InvalidArgument)
	if got := twerr.Meta("argument"); got != field {
		t.Fatalf("invalid argument %q (%s), want %q", got, twerr.Msg(), field)
	}
	if twerr.Meta("reason") == "" {
		t.Fatal("invalid argument without a reason")
	}
}

func TestListPlansInJapan(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	resp, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Country: "JP", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Total < 5 || int(resp.Total) != len(resp.Plans) {
		t.Fatalf("JP: total %d, %d plans on the page", resp.Total, len(resp.Plans))
	}
	var country, perDay int
	for _, p := range resp.Plans {
		if !slices.Contains(p.Countries, "JP") {
			t.Fatalf("plan %s (%s) does not cover JP: %v", p.Id, p.Name, p.Countries)
		}
		if p.Status != cataloguev1.PlanStatus_PLAN_STATUS_ACTIVE || len(p.Prices) != 3 || p.CreatedAt == nil {
			t.Fatalf("plan %s: status %s, %d prices, created %v", p.Name, p.Status, len(p.Prices), p.CreatedAt)
		}
		if p.Scope == cataloguev1.CoverageScope_COVERAGE_SCOPE_COUNTRY {
			country++
		}
		if p.Type == cataloguev1.PlanType_PLAN_TYPE_PER_DAY {
			perDay++
		}
	}
	if country < 4 || perDay == 0 {
		t.Fatalf("JP: %d country plans, %d per-day plans", country, perDay)
	}

	// Paging walks the same plans, the default page size is 20.
	first, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Country: "jp"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Total != resp.Total || len(first.Plans) != min(20, int(resp.Total)) || first.Plans[0].Id != resp.Plans[0].Id {
		t.Fatalf("default page: total %d, %d plans", first.Total, len(first.Plans))
	}
}

// Covers is what the gateway's topup_for asks: plans covering every
// country of an eSIM's plan, fewer than cover any one of them.
func TestListPlansCoveringCountries(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	jp, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Covers: []string{"JP"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	both, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Covers: []string{"jp", "FR"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(both.Plans) == 0 || int(both.Total) != len(both.Plans) || both.Total >= jp.Total {
		t.Fatalf("covering JP: %d plans; covering JP and FR: %d plans (total %d)", jp.Total, len(both.Plans), both.Total)
	}
	for _, p := range both.Plans {
		if !slices.Contains(p.Countries, "JP") || !slices.Contains(p.Countries, "FR") {
			t.Fatalf("plan %s (%s) does not cover JP and FR: %v", p.Id, p.Name, p.Countries)
		}
	}
}

func TestListPlansByTypeAndCurrency(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	resp, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Type: cataloguev1.PlanType_PLAN_TYPE_PER_DAY, Currency: "GBP", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Plans) == 0 {
		t.Fatal("no per-day plans")
	}
	for _, p := range resp.Plans {
		if p.Type != cataloguev1.PlanType_PLAN_TYPE_PER_DAY || !p.Unlimited || p.ValidityDays != 0 || p.TotalBytes != 0 {
			t.Fatalf("per-day filter returned %+v", p)
		}
	}
	all, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Type: cataloguev1.PlanType_PLAN_TYPE_FIXED, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if fixed.Total+resp.Total != all.Total || int(all.Total) != len(catalogue.SeedPlans()) {
		t.Fatalf("fixed %d + per-day %d != all %d", fixed.Total, resp.Total, all.Total)
	}
}

func TestRetiredPlanIsNotFound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := catalogue.SeedPlanID("jp-unlimited-day").String()
	if _, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id}); err != nil {
		t.Fatalf("GetPlan before retirement: %v", err)
	}
	retired, err := f.client.RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if retired.Status != cataloguev1.PlanStatus_PLAN_STATUS_RETIRED {
		t.Fatalf("retired plan has status %s", retired.Status)
	}
	_, err = f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id})
	wantCode(t, err, twirp.NotFound)

	got, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id, IncludeRetired: true})
	if err != nil || got.Status != cataloguev1.PlanStatus_PLAN_STATUS_RETIRED {
		t.Fatalf("GetPlan including retired: %v, %v", got, err)
	}
	list, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Country: "JP", Type: cataloguev1.PlanType_PLAN_TYPE_PER_DAY, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Plans {
		if p.Id == id {
			t.Fatal("retired plan still listed")
		}
	}
}

func TestUnknownAndMalformedIDsAreNotFound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, id := range []string{"0190d3f0-0000-7000-8000-0000000000ff", "not-a-uuid", "", "'; DROP TABLE plans; --"} {
		_, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id})
		wantCode(t, err, twirp.NotFound)
		_, err = f.client.RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: id})
		wantCode(t, err, twirp.NotFound)
	}
	f.wantNoInternalError(t, "not_found")
}

func TestGetPlansLeavesOutWhatGetPlanWouldNotFind(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	jp, fr := catalogue.SeedPlanID("jp-unlimited-day").String(), catalogue.SeedPlanID("fr-unlimited-day").String()
	if _, err := f.client.RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: fr}); err != nil {
		t.Fatal(err)
	}
	ids := []string{jp, "not-a-uuid", fr, "0190d3f0-0000-7000-8000-0000000000ff", jp}
	res, err := f.client.GetPlans(ctx, &cataloguev1.GetPlansRequest{Ids: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plans) != 1 || res.Plans[0].Id != jp {
		t.Fatalf("GetPlans: %v; want only %s (the others are retired, malformed or unknown)", res.Plans, jp)
	}
	single, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: jp})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(single, res.Plans[0]) {
		t.Fatalf("GetPlans and GetPlan disagree:\n%v\n%v", res.Plans[0], single)
	}
	res, err = f.client.GetPlans(ctx, &cataloguev1.GetPlansRequest{Ids: ids, IncludeRetired: true})
	if err != nil || len(res.Plans) != 2 {
		t.Fatalf("GetPlans including retired: %v, %v; want jp and fr", res.GetPlans(), err)
	}
	f.wantNoInternalError(t, "a left-out id")
}

func TestGetPlansRefusesMoreThanOneHundredIDs(t *testing.T) {
	f := newFixture(t)
	ids := make([]string, catalogue.MaxPlansPerGet+1)
	for i := range ids {
		ids[i] = catalogue.SeedPlanID("jp-unlimited-day").String()
	}
	_, err := f.client.GetPlans(context.Background(), &cataloguev1.GetPlansRequest{Ids: ids})
	wantInvalidArgument(t, err, "ids")
	res, err := f.client.GetPlans(context.Background(), &cataloguev1.GetPlansRequest{Ids: ids[1:]})
	if err != nil || len(res.Plans) != 1 {
		t.Fatalf("%d ids: %v, %v; want one plan", len(ids)-1, res.GetPlans(), err)
	}
}

func TestInvalidListArgumentsNameTheField(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		req   *cataloguev1.ListPlansRequest
		field string
	}{
		{&cataloguev1.ListPlansRequest{Page: -1}, "page"},
		{&cataloguev1.ListPlansRequest{Limit: 101}, "limit"},
		{&cataloguev1.ListPlansRequest{Limit: -5}, "limit"},
		{&cataloguev1.ListPlansRequest{Country: "XX"}, "country"},
		{&cataloguev1.ListPlansRequest{Currency: "JPY"}, "currency"},
		{&cataloguev1.ListPlansRequest{Type: cataloguev1.PlanType(7)}, "type"},
		// Letters that strings.ToUpper folds onto ASCII: the long s and the
		// dotless i once passed as US, IT and USD.
		{&cataloguev1.ListPlansRequest{Country: "u\u017f"}, "country"},
		{&cataloguev1.ListPlansRequest{Country: "\u0131t"}, "country"},
		{&cataloguev1.ListPlansRequest{Currency: "u\u017fd"}, "currency"},
		{&cataloguev1.ListPlansRequest{Covers: []string{"JP", "Japan"}}, "covers[1]"},
	} {
		_, err := f.client.ListPlans(ctx, tc.req)
		wantInvalidArgument(t, err, tc.field)
	}
}

func TestUpsertPlans(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	plan := &cataloguev1.Plan{
		Id:           "0190d3f0-0000-7000-8000-000000000042",
		Name:         "Japan 50 GB, 30 days",
		Type:         cataloguev1.PlanType_PLAN_TYPE_FIXED,
		Scope:        cataloguev1.CoverageScope_COVERAGE_SCOPE_COUNTRY,
		Countries:    []string{"JP"},
		TotalBytes:   50 << 30,
		ValidityDays: 30,
		Prices:       []*cataloguev1.Money{{AmountMinor: 6900, Currency: "USD"}, {AmountMinor: 6400, Currency: "EUR"}, {AmountMinor: 5500, Currency: "GBP"}},
	}
	resp, err := f.client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{plan}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Upserted != 1 || resp.Created != 1 || resp.Updated != 0 || resp.Unchanged != 0 {
		t.Fatalf("first upsert answered %v, want one plan created", resp)
	}
	// Sent again with a new name, and with one seeded plan as it is
	// stored: the answer tells the change from the no-op.
	seeded, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Country: "FR", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	renamed := proto.Clone(plan).(*cataloguev1.Plan)
	renamed.Name = "Japan 50 GB, 30 days (new)"
	resp, err = f.client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{renamed, seeded.Plans[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Upserted != 2 || resp.Created != 0 || resp.Updated != 1 || resp.Unchanged != 1 {
		t.Fatalf("second upsert answered %v, want one updated and one unchanged", resp)
	}
	plan.Name = renamed.Name
	got, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: plan.Id})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != plan.Name || got.Status != cataloguev1.PlanStatus_PLAN_STATUS_ACTIVE || got.Prices[0].Currency != "EUR" || got.Prices[2].AmountMinor != 6900 {
		t.Fatalf("stored plan %v", got)
	}
	// The newest plan heads the JP listing.
	list, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Country: "JP", Limit: 1})
	if err != nil || list.Plans[0].Id != plan.Id {
		t.Fatalf("newest JP plan: %v, %v", list.GetPlans(), err)
	}

	bad := &cataloguev1.Plan{Id: "nope"}
	_, err = f.client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{plan, bad}})
	wantInvalidArgument(t, err, "plans[1].id")

	plan.Countries = []string{"Japan"}
	_, err = f.client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{plan}})
	wantInvalidArgument(t, err, "plans[0].countries[0]")

	plan.Countries, plan.Type = []string{"JP"}, cataloguev1.PlanType_PLAN_TYPE_UNSPECIFIED
	_, err = f.client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{plan}})
	wantInvalidArgument(t, err, "plans[0].type")
}

func TestStorageFailureIsInternalAndLogged(t *testing.T) {
	f := newFixture(t)
	f.pool.Close()
	_, err := f.client.ListPlans(context.Background(), &cataloguev1.ListPlansRequest{})
	twerr := wantCode(t, err, twirp.Internal)
	if strings.Contains(twerr.Msg(), "closed") {
		t.Fatalf("internal error leaks its cause to callers: %q", twerr.Msg())
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "twirp internal error") || !strings.Contains(logs, "ListPlans") {
		t.Fatalf("internal error not logged with its method:\n%s", logs)
	}
}

// newFixtureWithContext is newFixture with every request's server-side
// context passed through reqCtx, when given. Logs are kept down to debug
// level, where a call cut short by its context is logged.
func newFixtureWithContext(t *testing.T, reqCtx func(context.Context) context.Context) fixture {
	t.Helper()
	pool := pgtest.New(t, postgres.Migrations)
	svc := catalogue.NewService(postgres.NewStore(pool), nil)
	if _, err := svc.Seed(context.Background()); err != nil {
		t.Fatalf("seed: %v", err)
	}
	logs := &telemetrytest.LogBuffer{}
	h := twirpserver.Handler(svc, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), internalauthtest.Callers())
	if reqCtx != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r.WithContext(reqCtx(r.Context())))
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return fixture{client: cataloguev1.NewCatalogueProtobufClient(srv.URL, internalauthtest.As(srv.Client(), internalauth.Operator)), pool: pool, logs: logs}
}

// logRecords are the JSON log lines written so far.
func (f fixture) logRecords() []map[string]any {
	var recs []map[string]any
	for line := range strings.Lines(f.logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// A call whose context ends on the server (the caller gave up, or a
// deadline passed) is Canceled or DeadlineExceeded with a bare message, as
// from the accounts service: not Internal, which is logged as an outage,
// and without the storage error's text, which can name the database's user
// and host. It is logged at debug level, never at error level.
func TestEndedContextIsCanceledOrDeadlineExceeded(t *testing.T) {
	ctx := context.Background()
	var mode atomic.Value // of string
	mode.Store("")
	f := newFixtureWithContext(t, func(ctx context.Context) context.Context {
		switch mode.Load() {
		case "canceled":
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		case "past deadline":
			ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			cancel() // the deadline has passed already; Err stays DeadlineExceeded
			return ctx
		}
		return ctx
	})
	jp, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{Country: "JP"})
	if err != nil || len(jp.Plans) == 0 {
		t.Fatalf("ListPlans JP = %v, %v", jp, err)
	}
	id := jp.Plans[0].Id

	for _, tc := range []struct {
		mode string
		code twirp.ErrorCode
		msg  string
	}{
		{"canceled", twirp.Canceled, "request canceled"},
		{"past deadline", twirp.DeadlineExceeded, "deadline exceeded"},
	} {
		mode.Store(tc.mode)
		for method, call := range map[string]func() error{
			"ListPlans": func() error {
				_, err := f.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{})
				return err
			},
			"GetPlan": func() error {
				_, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id})
				return err
			},
		} {
			twerr := wantCode(t, call(), tc.code)
			if twerr.Msg() != tc.msg {
				t.Errorf("%s %s: message %q, want the bare %q", tc.mode, method, twerr.Msg(), tc.msg)
			}
		}
	}
	mode.Store("")

	var cut int
	for _, rec := range f.logRecords() {
		if rec["level"] == "ERROR" {
			t.Errorf("a call cut short by its context was logged at error level: %v", rec)
		}
		if rec["msg"] == "twirp call cut short by its context" {
			if rec["level"] != "DEBUG" || rec["method"] == "" || rec["error"] == "" {
				t.Errorf("logged %v; want a debug line with the method and the cause", rec)
			}
			cut++
		}
	}
	if cut != 4 {
		t.Errorf("%d calls logged as cut short, want 4:\n%s", cut, f.logs)
	}
	if _, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id}); err != nil {
		t.Errorf("GetPlan afterwards: %v", err)
	}
}

// TestCallerThatGivesUpIsNotAnError: a caller whose deadline passes while
// its call waits (here on a locked table) closes the connection; the
// server's context ends, and that is logged at debug level as cut short,
// not at error level as an internal error.
func TestCallerThatGivesUpIsNotAnError(t *testing.T) {
	ctx := context.Background()
	f := newFixtureWithContext(t, func(ctx context.Context) context.Context { return ctx })

	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE plans IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := f.client.ListPlans(short, &cataloguev1.ListPlansRequest{}); err == nil {
		t.Fatal("ListPlans answered through a locked table")
	}

	var cut map[string]any
	for deadline := time.Now().Add(5 * time.Second); cut == nil && time.Now().Before(deadline); {
		for _, rec := range f.logRecords() {
			if rec["msg"] == "twirp call cut short by its context" {
				cut = rec
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = tx.Rollback(ctx)
	for _, rec := range f.logRecords() {
		if rec["level"] == "ERROR" {
			t.Errorf("a caller giving up was logged at error level: %v", rec)
		}
	}
	if cut == nil {
		t.Fatalf("the abandoned call was not logged at debug level:\n%s", f.logs)
	}
	if cut["level"] != "DEBUG" || cut["method"] != "ListPlans" || cut["code"] != "canceled" {
		t.Errorf("logged %v; want a debug line naming ListPlans and canceled", cut)
	}
}

// Every bad plan of a batch is invalid_argument naming its field, never
// internal, and the batch writes nothing: the stored plan it targets is
// unchanged and the batch's valid plan is not created.
func TestUpsertRejectsBadPlansAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	get := func(slug string) *cataloguev1.Plan {
		t.Helper()
		p, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: catalogue.SeedPlanID(slug).String()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	jp, asia := get("jp-5gb-30d"), get("asia-1gb-7d")
	withoutCurrency := func(c string) func(*cataloguev1.Plan) {
		return func(p *cataloguev1.Plan) {
			p.Prices = slices.DeleteFunc(p.Prices, func(m *cataloguev1.Money) bool { return m.Currency == c })
		}
	}
	for i, tc := range []struct {
		name   string
		base   *cataloguev1.Plan
		change func(*cataloguev1.Plan)
		field  string
		reason string // part of the reason, when it matters
	}{
		{"missing GBP", jp, withoutCurrency("GBP"), "plans[1].prices", "GBP"},
		{"missing USD", asia, withoutCurrency("USD"), "plans[1].prices", "USD"},
		{"price of MaxInt64", jp, func(p *cataloguev1.Plan) { p.Prices[2].AmountMinor = math.MaxInt64 }, "plans[1].prices[2].amount", ""},
		{"price just over the maximum", jp, func(p *cataloguev1.Plan) { p.Prices[0].AmountMinor = catalogue.MaxPriceMinor + 1 }, "plans[1].prices[0].amount", ""},
		{"total_bytes of MaxInt64", jp, func(p *cataloguev1.Plan) { p.TotalBytes = math.MaxInt64 }, "plans[1].total_bytes", ""},
		{"NUL in name", jp, func(p *cataloguev1.Plan) { p.Name = "Japan\x005 GB" }, "plans[1].name", ""},
		{"right-to-left override in name", jp, func(p *cataloguev1.Plan) { p.Name = "Japan \u202eBG 5" }, "plans[1].name", ""},
		{"NUL in region", asia, func(p *cataloguev1.Plan) { p.Region = "As\x00ia" }, "plans[1].region", ""},
		{"isolate in region", asia, func(p *cataloguev1.Plan) { p.Region = "\u2067Asia\u2069" }, "plans[1].region", ""},
		{"unknown status", jp, func(p *cataloguev1.Plan) { p.Status = cataloguev1.PlanStatus(7) }, "plans[1].status", ""},
		{"fixed to per_day", jp, func(p *cataloguev1.Plan) {
			p.Type, p.Unlimited, p.TotalBytes, p.ValidityDays = cataloguev1.PlanType_PLAN_TYPE_PER_DAY, true, 0, 0
		}, "plans[1].type", "retire it and create a new id"},
		{"region to global", asia, func(p *cataloguev1.Plan) {
			p.Scope, p.Region = cataloguev1.CoverageScope_COVERAGE_SCOPE_GLOBAL, ""
		}, "plans[1].scope", "retire it and create a new id"},
		{"country JP to FR", jp, func(p *cataloguev1.Plan) { p.Countries = []string{"FR"} }, "plans[1].countries", "retire it and create a new id"},
		{"country's name for its code", jp, func(p *cataloguev1.Plan) { p.Countries = []string{"Japan"} }, "plans[1].countries[0]", `"Japan"`},
		{"country of 100,000 characters", asia, func(p *cataloguev1.Plan) { p.Countries[3] = strings.Repeat("J", 100_000) }, "plans[1].countries[3]", "100000 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := proto.Clone(tc.base).(*cataloguev1.Plan)
			bad.Name += " (changed)"
			tc.change(bad)
			fresh := proto.Clone(jp).(*cataloguev1.Plan)
			fresh.Id = fmt.Sprintf("0190d3f0-0000-7000-8000-%012d", 500+i)
			_, err := f.client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{fresh, bad}})
			wantInvalidArgument(t, err, tc.field)
			var twerr twirp.Error
			errors.As(err, &twerr)
			if !strings.Contains(twerr.Meta("reason"), tc.reason) {
				t.Errorf("reason %.200q, want it to mention %q", twerr.Meta("reason"), tc.reason)
			}
			// The answer names what is wrong; it does not send a long
			// input back.
			if len(twerr.Msg()) > 300 || len(twerr.Meta("reason")) > 300 {
				t.Errorf("answer of %d bytes (reason %d): %.200q", len(twerr.Msg()), len(twerr.Meta("reason")), twerr.Msg())
			}
			if after := get(map[*cataloguev1.Plan]string{jp: "jp-5gb-30d", asia: "asia-1gb-7d"}[tc.base]); !proto.Equal(after, tc.base) {
				t.Fatalf("a rejected upsert changed the stored plan:\nbefore %v\nafter  %v", tc.base, after)
			}
			_, err = f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: fresh.Id, IncludeRetired: true})
			wantCode(t, err, twirp.NotFound)
		})
	}
	f.wantNoInternalError(t, "a bad plan")
}

// An unspecified status leaves the stored one (so re-sending a catalogue
// never re-activates a retired plan); a padded name is measured trimmed.
func TestUpsertKeepsStatusAndTrimsBeforeMeasuring(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := catalogue.SeedPlanID("jp-5gb-30d").String()
	plan, err := f.client.RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("n", catalogue.MaxNameLength)
	plan.Status, plan.Name = cataloguev1.PlanStatus_PLAN_STATUS_UNSPECIFIED, " "+name+" "
	if _, err := f.client.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{plan}}); err != nil {
		t.Fatalf("padded %d-character name: %v", catalogue.MaxNameLength, err)
	}
	got, err := f.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id, IncludeRetired: true})
	if err != nil || got.Name != name || got.Status != cataloguev1.PlanStatus_PLAN_STATUS_RETIRED {
		t.Fatalf("stored %v, %v; want the trimmed name, still retired", got, err)
	}
}

func TestPolicyCoversEveryMethod(t *testing.T) {
	var methods []string
	service := cataloguev1.File_catalogue_v1_catalogue_proto.Services().ByName("Catalogue")
	for i := range service.Methods().Len() {
		methods = append(methods, string(service.Methods().Get(i).Name()))
	}
	if err := twirpserver.Policy.Check(methods); err != nil {
		t.Fatal(err)
	}
}
