package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/money"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

type topUpJSON struct {
	ID     string `json:"id"`
	EsimID string `json:"esim_id"`
	PlanID string `json:"plan_id"`
	Days   int    `json:"days"`
	Price  struct {
		Amount   json.Number `json:"amount"`
		Currency string      `json:"currency"`
	} `json:"price"`
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	CreatedAt string `json:"created_at"`
}

// lifecycleJSON is what an eSIM says of its life after the sale.
type lifecycleJSON struct {
	ID           string  `json:"id"`
	OrderID      string  `json:"order_id"`
	Status       string  `json:"status"`
	ValidityDays int     `json:"validity_days"`
	InstalledAt  *string `json:"installed_at"`
	ActivatedAt  *string `json:"activated_at"`
	ExpiresAt    *string `json:"expires_at"`
	Data         struct {
		Unlimited      bool   `json:"unlimited"`
		TotalBytes     *int64 `json:"total_bytes"`
		UsedBytes      int64  `json:"used_bytes"`
		RemainingBytes *int64 `json:"remaining_bytes"`
	} `json:"data"`
	TopUps []topUpJSON `json:"topups"`
}

// post posts body to path with an Idempotency-Key (none when empty).
func (pt partner) post(path, idempotencyKey, body string) response {
	pt.p.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, pt.p.gateway+path, strings.NewReader(body))
	req.Header.Set("Authorization", bearer(pt.key))
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	return pt.p.send(req)
}

func (pt partner) topUpEsim(esimID, idempotencyKey, body string) response {
	pt.p.t.Helper()
	return pt.post("/v1/esims/"+esimID+"/topups", idempotencyKey, body)
}

func (pt partner) simulate(esimID, body string) response {
	pt.p.t.Helper()
	return pt.post("/v1/sandbox/esims/"+esimID+"/simulate", "", body)
}

// esim reads GET /v1/esims/{id}.
func (pt partner) esim(id string) lifecycleJSON {
	pt.p.t.Helper()
	r := pt.p.get("/v1/esims/"+id, bearer(pt.key))
	if r.status != http.StatusOK {
		pt.p.t.Fatalf("GET /v1/esims/%s: %d %s", id, r.status, r.body)
	}
	var e struct{ Data lifecycleJSON }
	r.json(pt.p.t, &e)
	return e.Data
}

// plans lists GET /v1/plans?query (limit 100).
func (pt partner) plans(query string) planList {
	pt.p.t.Helper()
	r := pt.p.get("/v1/plans?limit=100&"+query, bearer(pt.key))
	if r.status != http.StatusOK {
		pt.p.t.Fatalf("GET /v1/plans?%s: %d %s", query, r.status, r.body)
	}
	var l planList
	r.json(pt.p.t, &l)
	return l
}

// countryPlan is a plan of planType covering country alone.
func (pt partner) countryPlan(country, planType string) planJSON {
	pt.p.t.Helper()
	for _, pl := range pt.plans("country=" + country + "&type=" + planType).Data {
		if pl.Coverage.Scope == "country" {
			return pl
		}
	}
	pt.p.t.Fatalf("no %s country plan for %s", planType, country)
	return planJSON{}
}

// orderEsim orders one eSIM of plan and returns its id.
func (pt partner) orderEsim(plan string) string {
	pt.p.t.Helper()
	r := pt.order("", orderBody(plan, ""))
	if r.status != http.StatusCreated {
		pt.p.t.Fatalf("order: %d %s", r.status, r.body)
	}
	var o struct{ Data orderJSON }
	r.json(pt.p.t, &o)
	return o.Data.Esims[0].ID
}

// simulated posts a simulation, which must answer the eSIM in status,
// passing check, and as GET /v1/esims/{id} then answers it.
func simulated(t *testing.T, pt partner, esimID, body, status string, check func(lifecycleJSON) bool) {
	t.Helper()
	r := pt.simulate(esimID, body)
	if r.status != http.StatusOK {
		t.Fatalf("simulate %s: %d %s", body, r.status, r.body)
	}
	var moved struct{ Data lifecycleJSON }
	r.json(t, &moved)
	if moved.Data.Status != status || !check(moved.Data) {
		t.Fatalf("simulate %s: %+v, want %s", body, moved.Data, status)
	}
	if got := pt.esim(esimID); !equalJSON(t, got, moved.Data) {
		t.Errorf("simulate %s answered %+v, GET answers %+v", body, moved.Data, got)
	}
}

// later reports whether RFC 3339 time a is days after b.
func later(t *testing.T, a, b string, days int) bool {
	t.Helper()
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	if errA != nil || errB != nil {
		t.Fatalf("times %q, %q: %v, %v", a, b, errA, errB)
	}
	return ta.Sub(tb) == time.Duration(days)*24*time.Hour
}

func minor(t *testing.T, n json.Number) int64 {
	t.Helper()
	m, err := money.ParseDecimal(n.String())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSandboxEsimLifeWithATopUp walks a sandbox eSIM through the API as
// the README's walk-through does: the plans that may top it up, install,
// activate, consume 60 percent and then past the total, a top-up (and
// its replay, charged once) that makes it ACTIVE again, and expiry, after
// which a top-up is refused and charges nothing.
func TestSandboxEsimLifeWithATopUp(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("USD", sandbox, 500_00)
	plan := pt.countryPlan("JP", "fixed")
	esimID := pt.orderEsim(plan.ID)
	fresh := pt.esim(esimID)
	if fresh.Status != "ALLOCATED" || fresh.InstalledAt != nil || fresh.ActivatedAt != nil || fresh.ExpiresAt != nil || len(fresh.TopUps) != 0 ||
		fresh.Data.TotalBytes == nil || fresh.Data.RemainingBytes == nil || *fresh.Data.RemainingBytes != *plan.Data.TotalBytes {
		t.Fatalf("fresh eSIM %+v", fresh)
	}

	// The plans for a top-up are fixed ones covering JP, the eSIM's own
	// plan among them; the country filter narrows them further.
	candidates := pt.plans("topup_for=" + esimID)
	if candidates.Pagination.Total == 0 || !slices.ContainsFunc(candidates.Data, func(pl planJSON) bool { return pl.ID == plan.ID }) {
		t.Fatalf("plans for a top-up %+v lack the eSIM's own plan %s", candidates, plan.ID)
	}
	for _, pl := range candidates.Data {
		if pl.Type != "fixed" || !slices.Contains(pl.Coverage.Countries, "JP") {
			t.Errorf("plan %s (%s, %v) listed for a top-up of a fixed JP eSIM", pl.ID, pl.Type, pl.Coverage.Countries)
		}
	}
	if all := pt.plans("type=fixed&country=JP"); all.Pagination.Total != candidates.Pagination.Total {
		t.Errorf("%d plans for a top-up, %d fixed plans covering JP: want the same", candidates.Pagination.Total, all.Pagination.Total)
	}
	if none := pt.plans("topup_for=" + esimID + "&type=per_day"); none.Pagination.Total != 0 || len(none.Data) != 0 {
		t.Errorf("per-day plans for a fixed eSIM: %+v", none)
	}
	if fr := pt.plans("topup_for=" + esimID + "&country=FR"); slices.ContainsFunc(fr.Data, func(pl planJSON) bool { return !slices.Contains(pl.Coverage.Countries, "FR") }) {
		t.Errorf("topup_for with country=FR lists a plan not covering FR: %+v", fr.Data)
	}

	// The life of the eSIM, as the network would move it, to DEPLETED.
	total := *plan.Data.TotalBytes
	for _, step := range []struct {
		body, status string
		check        func(lifecycleJSON) bool
	}{
		{`{"action":"install"}`, "INSTALLED", func(e lifecycleJSON) bool { return e.InstalledAt != nil && e.ActivatedAt == nil && e.ExpiresAt == nil }},
		{`{"action":"activate"}`, "ACTIVE", func(e lifecycleJSON) bool { return e.ActivatedAt != nil && e.ExpiresAt != nil }},
		{fmt.Sprintf(`{"action":"consume","bytes":%d}`, total*6/10), "ACTIVE", func(e lifecycleJSON) bool {
			return e.Data.UsedBytes == total*6/10 && *e.Data.RemainingBytes == total-total*6/10
		}},
		{fmt.Sprintf(`{"action":"consume","bytes":%d}`, total), "DEPLETED", func(e lifecycleJSON) bool {
			return e.Data.UsedBytes == total && *e.Data.RemainingBytes == 0
		}},
	} {
		simulated(t, pt, esimID, step.body, step.status, step.check)
	}
	depleted := pt.esim(esimID)

	// A top-up makes it ACTIVE again, with the plan's bytes and days more;
	// its replay is the same answer and no second charge.
	before := pt.balance()
	price := minor(t, plan.Price.Amount)
	body := fmt.Sprintf(`{"plan_id":%q}`, plan.ID)
	r := pt.topUpEsim(esimID, "more-data", body)
	if r.status != http.StatusCreated || r.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("top-up: %d (replay %q) %s", r.status, r.header.Get("Idempotent-Replay"), r.body)
	}
	var created struct{ Data topUpJSON }
	r.json(t, &created)
	tu := created.Data
	if tu.EsimID != esimID || tu.PlanID != plan.ID || tu.Days != *plan.ValidityDays || tu.Status != "completed" || tu.Error != nil ||
		minor(t, tu.Price.Amount) != price || tu.Price.Currency != "USD" {
		t.Fatalf("top-up %+v", tu)
	}
	replay := pt.topUpEsim(esimID, "more-data", body)
	if replay.status != http.StatusOK || replay.header.Get("Idempotent-Replay") != "true" || string(replay.body) != string(r.body) {
		t.Fatalf("replay: %d (replay %q) %s\nfirst: %s", replay.status, replay.header.Get("Idempotent-Replay"), replay.body, r.body)
	}
	if got := pt.balance(); got != before-price {
		t.Errorf("balance %d after a top-up and its replay, want %d (one charge)", got, before-price)
	}
	e := pt.esim(esimID)
	if e.Status != "ACTIVE" || len(e.TopUps) != 1 || !equalJSON(t, e.TopUps[0], tu) || *e.Data.TotalBytes != 2*total || *e.Data.RemainingBytes != total ||
		e.ValidityDays != 2**plan.ValidityDays || !later(t, *e.ExpiresAt, *depleted.ExpiresAt, *plan.ValidityDays) {
		t.Fatalf("eSIM after a top-up %+v, was %+v", e, depleted)
	}

	simulated(t, pt, esimID, `{"action":"expire"}`, "EXPIRED", func(e lifecycleJSON) bool { return e.ExpiresAt != nil })

	// An expired eSIM is not topped up: 400 naming id, nothing charged.
	expired := pt.balance()
	e2 := p.expectError(pt.topUpEsim(esimID, "too-late", body), http.StatusBadRequest, "invalid_request")
	if got := detailFields(e2); !slices.Equal(got, []string{"id"}) {
		t.Errorf("top-up of an expired eSIM names %v, want id", got)
	}
	if got := pt.balance(); got != expired {
		t.Errorf("balance %d after a refused top-up, want %d", got, expired)
	}
	// Out of order now: EXPIRED is final.
	e3 := p.expectError(pt.simulate(esimID, `{"action":"activate"}`), http.StatusBadRequest, "invalid_request")
	if got := detailFields(e3); !slices.Equal(got, []string{"action"}) {
		t.Errorf("activating an expired eSIM names %v, want action", got)
	}
	pt.checkMoney()
}

// TestEveryBadTopUpIsRefusedAndChargesNothing: each refusal's status,
// code and fields, then the balance and the eSIM untouched.
func TestEveryBadTopUpIsRefusedAndChargesNothing(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("EUR", sandbox, 100_00)
	jp := pt.countryPlan("JP", "fixed")
	fr := pt.countryPlan("FR", "fixed")
	perDay := pt.countryPlan("JP", "per_day")
	esimID := pt.orderEsim(jp.ID)
	other := p.partner("EUR", sandbox, 100_00)
	othersEsim := other.orderEsim(jp.ID)
	// A top-up whose key is then reused with another body.
	if r := pt.topUpEsim(esimID, "used", fmt.Sprintf(`{"plan_id":%q}`, jp.ID)); r.status != http.StatusCreated {
		t.Fatalf("top-up: %d %s", r.status, r.body)
	}
	balance, esim := pt.balance(), pt.esim(esimID)

	for _, tc := range []struct {
		name, esim, key, body string
		status                int
		code                  string
		fields                []string
	}{
		{"a plan of another type", esimID, "", fmt.Sprintf(`{"plan_id":%q}`, perDay.ID), 400, "invalid_request", []string{"plan_id"}},
		{"a plan not covering JP", esimID, "", fmt.Sprintf(`{"plan_id":%q}`, fr.ID), 400, "invalid_request", []string{"plan_id"}},
		{"days on a fixed plan", esimID, "", fmt.Sprintf(`{"plan_id":%q,"days":3}`, jp.ID), 400, "invalid_request", []string{"days"}},
		{"days 0", esimID, "", fmt.Sprintf(`{"plan_id":%q,"days":0}`, jp.ID), 400, "invalid_request", []string{"days"}},
		{"no plan", esimID, "", `{}`, 400, "invalid_request", []string{"plan_id"}},
		{"unknown field", esimID, "", fmt.Sprintf(`{"plan_id":%q,"quantity":1}`, jp.ID), 400, "invalid_request", []string{"quantity"}},
		{"a key used for another body", esimID, "used", fmt.Sprintf(`{"plan_id":%q,"days":1}`, jp.ID), 400, "invalid_request", []string{"Idempotency-Key"}},
		{"a key used for an order", esimID, "order-key", fmt.Sprintf(`{"plan_id":%q}`, jp.ID), 400, "invalid_request", []string{"Idempotency-Key"}},
		{"idempotency key too long", esimID, strings.Repeat("k", 256), fmt.Sprintf(`{"plan_id":%q}`, jp.ID), 400, "invalid_request", []string{"Idempotency-Key"}},
		{"unknown plan", esimID, "", fmt.Sprintf(`{"plan_id":%q}`, uuid.NewString()), 404, "not_found", nil},
		{"unknown eSIM", uuid.NewString(), "", fmt.Sprintf(`{"plan_id":%q}`, jp.ID), 404, "not_found", nil},
		{"another account's eSIM", othersEsim, "", fmt.Sprintf(`{"plan_id":%q}`, jp.ID), 404, "not_found", nil},
		{"malformed eSIM id", "not-a-uuid", "", fmt.Sprintf(`{"plan_id":%q}`, jp.ID), 404, "not_found", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.key == "order-key" {
				if r := pt.order("order-key", orderBody(jp.ID, "")); r.status != http.StatusCreated {
					t.Fatalf("order: %d %s", r.status, r.body)
				}
				balance = pt.balance()
			}
			e := p.expectError(pt.topUpEsim(tc.esim, tc.key, tc.body), tc.status, tc.code)
			if got := detailFields(e); !slices.Equal(got, tc.fields) {
				t.Errorf("details name %v, want %v: %+v", got, tc.fields, e.Error.Details)
			}
		})
	}
	// Too little money: 402, nothing kept, so the same key goes through
	// after the balance is topped up.
	poor := p.partner("EUR", sandbox, 0)
	poor.topUp(minor(t, jp.Price.Amount))
	poorEsim := poor.orderEsim(jp.ID)
	p.expectError(poor.topUpEsim(poorEsim, "short", fmt.Sprintf(`{"plan_id":%q}`, jp.ID)), http.StatusPaymentRequired, "insufficient_funds")
	if got := poor.balance(); got != 0 || len(poor.esim(poorEsim).TopUps) != 0 {
		t.Errorf("after a 402: balance %d, top-ups %+v", got, poor.esim(poorEsim).TopUps)
	}
	poor.topUp(minor(t, jp.Price.Amount))
	if r := poor.topUpEsim(poorEsim, "short", fmt.Sprintf(`{"plan_id":%q}`, jp.ID)); r.status != http.StatusCreated {
		t.Errorf("the same key after a 402 and a top-up: %d %s", r.status, r.body)
	}

	if got := pt.balance(); got != balance {
		t.Errorf("balance %d after refused top-ups, want %d", got, balance)
	}
	if after := pt.esim(esimID); !equalJSON(t, after, esim) {
		t.Errorf("the eSIM changed with refused top-ups:\n%+v\nwas\n%+v", after, esim)
	}
	pt.checkMoney()
	poor.checkMoney()
}

// TestPlansForATopUpRefuseWhatTheyCannotFind: a malformed topup_for is
// 400 naming it; an unknown eSIM, another account's and the sandbox's
// seen with the same account's live key are 404.
func TestPlansForATopUpRefuseWhatTheyCannotFind(t *testing.T) {
	p := start(t, options{})
	owner := p.partner("USD", sandbox, 100_00)
	esimID := owner.orderEsim(owner.countryPlan("JP", "fixed").ID)
	liveKey, err := p.accounts.CreateKey(t.Context(), &accountsv1.CreateKeyRequest{AccountId: owner.accountID, Environment: live})
	if err != nil {
		t.Fatal(err)
	}
	other := p.partner("USD", sandbox, 0)
	for _, key := range []string{liveKey.GetSecret(), other.key} {
		p.expectError(p.get("/v1/plans?topup_for="+esimID, bearer(key)), http.StatusNotFound, "not_found")
	}
	p.expectError(p.get("/v1/plans?topup_for="+uuid.NewString(), bearer(owner.key)), http.StatusNotFound, "not_found")
	for _, bad := range []string{"nope", "{" + esimID + "}", strings.ReplaceAll(esimID, "-", "")} {
		e := p.expectError(p.get("/v1/plans?topup_for="+bad, bearer(owner.key)), http.StatusBadRequest, "invalid_request")
		if got := detailFields(e); !slices.Equal(got, []string{"topup_for"}) {
			t.Errorf("topup_for=%s: details %v", bad, got)
		}
	}
}

// TestSimulationIsForSandboxEsimsOnly: a live key is not_found, on a
// live eSIM, on the account's sandbox eSIM and with a body it would
// refuse; another account's sandbox eSIM is not_found; an action out of
// order or bytes where they do not belong is 400 naming it. None moves
// the eSIM.
func TestSimulationIsForSandboxEsimsOnly(t *testing.T) {
	p := start(t, options{})
	owner := p.partner("USD", sandbox, 100_00)
	esimID := owner.orderEsim(owner.countryPlan("JP", "fixed").ID)
	fresh := owner.esim(esimID)
	liveKey, err := p.accounts.CreateKey(t.Context(), &accountsv1.CreateKeyRequest{AccountId: owner.accountID, Environment: live})
	if err != nil {
		t.Fatal(err)
	}
	ownLive := partner{p: p, accountID: owner.accountID, key: liveKey.GetSecret(), env: live, currency: "USD"}
	other := p.partner("USD", sandbox, 0)
	for _, tc := range []struct {
		name string
		pt   partner
		esim string
		body string
		code int
		err  string
		// fields named by a 400
		fields []string
	}{
		{"live key", ownLive, esimID, `{"action":"install"}`, 404, "not_found", nil},
		{"live key, a body it would refuse", ownLive, esimID, `{"action":"fly"}`, 404, "not_found", nil},
		{"live key, an unknown eSIM", ownLive, uuid.NewString(), `{"action":"install"}`, 404, "not_found", nil},
		{"another account's eSIM", other, esimID, `{"action":"install"}`, 404, "not_found", nil},
		{"an unknown eSIM", owner, uuid.NewString(), `{"action":"install"}`, 404, "not_found", nil},
		{"a malformed id", owner, "nope", `{"action":"install"}`, 404, "not_found", nil},
		{"activate before install", owner, esimID, `{"action":"activate"}`, 400, "invalid_request", []string{"action"}},
		{"consume when not active", owner, esimID, `{"action":"consume","bytes":10}`, 400, "invalid_request", []string{"action"}},
		{"bytes with install", owner, esimID, `{"action":"install","bytes":10}`, 400, "invalid_request", []string{"bytes"}},
		{"consume without bytes", owner, esimID, `{"action":"consume"}`, 400, "invalid_request", []string{"bytes"}},
		{"bytes 0", owner, esimID, `{"action":"consume","bytes":0}`, 400, "invalid_request", []string{"bytes"}},
		{"an unknown action", owner, esimID, `{"action":"fly"}`, 400, "invalid_request", []string{"action"}},
		{"an unknown field", owner, esimID, `{"action":"install","device":"x"}`, 400, "invalid_request", []string{"device"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := p.expectError(tc.pt.simulate(tc.esim, tc.body), tc.code, tc.err)
			if got := detailFields(e); !slices.Equal(got, tc.fields) {
				t.Errorf("details name %v, want %v", got, tc.fields)
			}
		})
	}
	if got := owner.esim(esimID); !equalJSON(t, got, fresh) {
		t.Errorf("refused simulations moved the eSIM: %+v, was %+v", got, fresh)
	}
}

// TestALiveTopUpTheNetworkCannotTakeIsRefunded: with no network for
// live top-ups, a live top-up comes back failed: 502 provider_error,
// refunded in full, shown failed on the eSIM; its replay is the same
// 502 with Idempotent-Replay.
func TestALiveTopUpTheNetworkCannotTakeIsRefunded(t *testing.T) {
	p, _ := startLive(t)
	pt := p.partner("USD", live, 200_00)
	plan := pt.countryPlan("JP", "fixed")
	esimID := pt.orderEsim(plan.ID)
	before := pt.balance()
	body := fmt.Sprintf(`{"plan_id":%q}`, plan.ID)
	first := pt.topUpEsim(esimID, "live-top-up", body)
	e := p.expectError(first, http.StatusBadGateway, "provider_error")
	if first.header.Get("Idempotent-Replay") != "" {
		t.Errorf("first answer with Idempotent-Replay %q", first.header.Get("Idempotent-Replay"))
	}
	if got := pt.balance(); got != before {
		t.Errorf("balance %d after a failed top-up, want %d (refunded)", got, before)
	}
	esim := pt.esim(esimID)
	if len(esim.TopUps) != 1 || esim.TopUps[0].Status != "failed" || esim.TopUps[0].Error == nil || esim.TopUps[0].Error.Code != "provider_error" ||
		!strings.Contains(e.Error.Message, esim.TopUps[0].ID) || *esim.Data.TotalBytes != *plan.Data.TotalBytes {
		t.Fatalf("eSIM after a failed top-up %+v; the 502 said %q", esim, e.Error.Message)
	}
	replay := pt.topUpEsim(esimID, "live-top-up", body)
	re := p.expectError(replay, http.StatusBadGateway, "provider_error")
	if replay.header.Get("Idempotent-Replay") != "true" || re.Error.Message != e.Error.Message {
		t.Errorf("replay: header %q, message %q; want true and %q", replay.header.Get("Idempotent-Replay"), re.Error.Message, e.Error.Message)
	}
	if got := pt.balance(); got != before {
		t.Errorf("balance %d after a replayed failure, want %d", got, before)
	}
	pt.checkMoney()
}

// TestSandboxEsimEventsArriveAsDocumented: the README's sandbox walk
// (install, activate, 60 percent, past the total, a top-up, expire)
// delivers each event once, every one signed, matching its schema in the
// document's webhooks section (threshold_percent included), its data the
// eSIM, or the top-up as POST answered it; GET /v1/events filters by the
// new kinds.
func TestSandboxEsimEventsArriveAsDocumented(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("USD", sandbox, 200_00)
	hooks := webhooktest.NewReceiver(t)
	secret := pt.setWebhook(hooks.URL)
	hooks.Trust(secret)
	plan := pt.countryPlan("JP", "fixed")
	esimID := pt.orderEsim(plan.ID)
	total := *plan.Data.TotalBytes
	for _, body := range []string{
		`{"action":"install"}`, `{"action":"activate"}`,
		fmt.Sprintf(`{"action":"consume","bytes":%d}`, total*6/10), fmt.Sprintf(`{"action":"consume","bytes":%d}`, total),
	} {
		if r := pt.simulate(esimID, body); r.status != http.StatusOK {
			t.Fatalf("simulate %s: %d %s", body, r.status, r.body)
		}
	}
	r := pt.topUpEsim(esimID, "", fmt.Sprintf(`{"plan_id":%q}`, plan.ID))
	if r.status != http.StatusCreated {
		t.Fatalf("top-up: %d %s", r.status, r.body)
	}
	var topUp struct {
		Data json.RawMessage `json:"data"`
	}
	r.json(t, &topUp)
	if r := pt.simulate(esimID, `{"action":"expire"}`); r.status != http.StatusOK {
		t.Fatalf("expire: %d %s", r.status, r.body)
	}

	want := []string{"esim.activated", "esim.expired", "esim.installed", "esim.usage 100", "esim.usage 50", "esim.usage 80", "order.completed", "topup.completed"}
	doc := p.openAPIDoc()
	var got []string
	for _, d := range hooks.Wait(t, len(want), 20*time.Second) {
		checkWebhook(t, doc, d)
		if !d.VerifiedBy(secret) {
			t.Errorf("the Standard Webhooks library refused the delivery: %v", d.Checks[secret])
		}
		var b struct {
			hookBody
			Threshold *int `json:"threshold_percent"`
		}
		if err := json.Unmarshal(d.Body, &b); err != nil {
			t.Fatal(err)
		}
		var data struct {
			ID     string `json:"id"`
			EsimID string `json:"esim_id"`
		}
		_ = json.Unmarshal(b.Data, &data)
		switch {
		case b.Event == "esim.usage" && b.Threshold != nil:
			got = append(got, fmt.Sprintf("%s %d", b.Event, *b.Threshold))
		case b.Threshold != nil:
			t.Errorf("%s carries threshold_percent %d", b.Event, *b.Threshold)
		default:
			got = append(got, b.Event)
		}
		switch {
		case strings.HasPrefix(b.Event, "esim.") && data.ID != esimID:
			t.Errorf("%s about eSIM %q, want %s", b.Event, data.ID, esimID)
		case b.Event == "topup.completed" && !bytes.Equal(b.Data, topUp.Data):
			t.Errorf("topup.completed's data is not the top-up as POST answered it:\nevent: %s\nAPI:   %s", b.Data, topUp.Data)
		}
	}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}

	// The order's events are its eSIM's and top-up's too.
	orderID := pt.esim(esimID).OrderID
	pt.eventsUntil("order_id="+orderID, 10*time.Second, func(l eventList) bool { return l.Pagination.Total == len(want) })
	for event, n := range map[string]int{"esim.usage": 3, "topup.completed": 1, "esim.expired": 1, "order.completed": 1} {
		// Delivered, and recorded so a moment after the receiver answered.
		list := pt.eventsUntil("event="+event, 10*time.Second, func(l eventList) bool {
			return l.Pagination.Total == n && !slices.ContainsFunc(l.Data, func(e eventJSON) bool { return e.Status != "delivered" })
		})
		for _, e := range list.Data {
			if e.Event != event {
				t.Errorf("GET /v1/events?event=%s lists %+v", event, e)
			}
		}
	}
}
