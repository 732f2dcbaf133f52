package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/money"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// startOrdering runs the real ordering service, with the real catalogue
// (seeded) and wallet it calls, each on its own fresh database. It returns
// ordering's URL and a client that orders as the gateway does.
func startOrdering(t *testing.T) (*orderingtest.Deps, string, orderingv1.Ordering) {
	t.Helper()
	deps := orderingtest.StartDeps(t, nil)
	_, u := orderingtest.Start(t, deps.Config(t))
	return deps, u, orderingtest.Client(u, internalauth.Gateway)
}

// order is an order as esimctl prints it with --json.
type order struct {
	ID          string `json:"id"`
	AccountID   string `json:"account_id"`
	Environment string `json:"environment"`
	Status      string `json:"status"`
	PlanID      string `json:"plan_id"`
	Quantity    int32  `json:"quantity"`
	Days        *int32 `json:"days"`
	Price       struct {
		UnitMinor  int64  `json:"unit_minor"`
		TotalMinor int64  `json:"total_minor"`
		Currency   string `json:"currency"`
	} `json:"price"`
	Customer struct {
		Name      *string `json:"name"`
		Email     *string `json:"email"`
		Reference *string `json:"reference"`
	} `json:"customer"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	CreatedAt *string `json:"created_at"`
	Esims     []struct {
		ID             string `json:"id"`
		OrderID        string `json:"order_id"`
		ICCID          string `json:"iccid"`
		QRCodeURL      string `json:"qr_code_url"`
		ActivationCode string `json:"activation_code"`
		SMDPAddress    string `json:"smdp_address"`
		MatchingID     string `json:"matching_id"`
		Status         string `json:"status"`
		ValidityDays   int32  `json:"validity_days"`
		Data           struct {
			Unlimited  bool   `json:"unlimited"`
			TotalBytes *int64 `json:"total_bytes"`
		} `json:"data"`
		Install struct {
			Instructions string `json:"instructions"`
		} `json:"install"`
	} `json:"esims"`
}

// placeOrder orders as the gateway does for a partner's sandbox key.
func placeOrder(t *testing.T, client orderingv1.Ordering, accountID, planSlug string, quantity, days int32, reference string) *orderingv1.Order {
	t.Helper()
	req := &orderingv1.CreateOrderRequest{
		Scope:    &orderingv1.Scope{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
		Currency: "USD", IdempotencyKey: uuid.NewString(), PlanId: catalogue.SeedPlanID(planSlug).String(),
		Quantity: &quantity, Customer: &orderingv1.Customer{Name: "Ada Lovelace", Email: "ada@example.com", Reference: reference},
	}
	if days > 0 {
		req.Days = &days
	}
	resp, err := client.CreateOrder(context.Background(), req)
	if err != nil {
		t.Fatalf("create order of %s: %v", planSlug, err)
	}
	return resp.GetOrder()
}

func ids(orders []order) []string {
	out := make([]string, len(orders))
	for i, o := range orders {
		out[i] = o.ID
	}
	return out
}

func TestOrdersListAndGet(t *testing.T) {
	deps, orderingURL, client := startOrdering(t)
	env := map[string]string{"ESIM_ORDERING_URL": orderingURL}
	accts := newAccounts(t, env, 2)
	acct, other := accts[0], accts[1]
	deps.TopUp(t, acct, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 1000_00, "seed")
	deps.TopUp(t, other, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 1000_00, "seed")

	fixed := placeOrder(t, client, acct, "jp-5gb-30d", 2, 0, "BOOK-1")
	perDay := placeOrder(t, client, acct, "jp-unlimited-day", 1, 7, "BOOK-2")
	failed := placeOrder(t, client, acct, "jp-1gb-7d", 1, 0, "sandbox:provider_error")
	elsewhere := placeOrder(t, client, other, "jp-1gb-7d", 1, 0, "BOOK-1")
	if fixed.GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED || perDay.GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED ||
		failed.GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_FAILED || elsewhere.GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
		t.Fatalf("orders placed: %s, %s, %s, %s", fixed.GetStatus(), perDay.GetStatus(), failed.GetStatus(), elsewhere.GetStatus())
	}

	// Newest first, the account's own only, with the pagination.
	var all []order
	p := paginationOf(t, esimctl(t, env, "orders", "list", "--account", acct, "--env", "sandbox", "--json").ok(t).data(t, &all))
	if got, want := strings.Join(ids(all), " "), strings.Join([]string{failed.GetId(), perDay.GetId(), fixed.GetId()}, " "); got != want {
		t.Fatalf("orders list: %s\nwant newest first: %s", got, want)
	}
	if p != (pagination{Page: 1, Limit: ordering.DefaultPageLimit, Total: 3}) {
		t.Errorf("orders list pagination %+v", p)
	}
	if o := all[2]; o.AccountID != acct || o.Environment != "sandbox" || o.Status != "completed" || o.Quantity != 2 || o.Days != nil ||
		o.Price.TotalMinor != fixed.GetPrice().GetTotalMinor() || o.Price.TotalMinor != 2*o.Price.UnitMinor || o.Price.Currency != "USD" ||
		len(o.Esims) != 2 || o.Customer.Reference == nil || *o.Customer.Reference != "BOOK-1" {
		t.Errorf("listed fixed order = %+v", o)
	}
	if o := all[1]; o.Days == nil || *o.Days != 7 || len(o.Esims) != 1 || o.Esims[0].ValidityDays != 7 || !o.Esims[0].Data.Unlimited || o.Esims[0].Data.TotalBytes != nil {
		t.Errorf("listed per-day order = %+v", o)
	}
	if o := all[0]; o.Status != "failed" || o.Error == nil || o.Error.Code != "provider_error" || len(o.Esims) != 0 {
		t.Errorf("listed failed order = %+v", o)
	}

	// Filters.
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"--status", "failed"}, []string{failed.GetId()}},
		{[]string{"--status", "completed"}, []string{perDay.GetId(), fixed.GetId()}},
		{[]string{"--status", "pending"}, []string{}},
		{[]string{"--reference", "BOOK-2"}, []string{perDay.GetId()}},
		{[]string{"--reference", "BOOK-1", "--status", "completed"}, []string{fixed.GetId()}},
		{[]string{"--reference", "nobody"}, []string{}},
	} {
		var got []order
		args := append([]string{"orders", "list", "--account", acct, "--env", "sandbox", "--json"}, tc.flags...)
		p := paginationOf(t, esimctl(t, env, args...).ok(t).data(t, &got))
		if strings.Join(ids(got), " ") != strings.Join(tc.want, " ") || p.Total != int32(len(tc.want)) {
			t.Errorf("orders list %s: %v (total %d), want %v", strings.Join(tc.flags, " "), ids(got), p.Total, tc.want)
		}
	}

	// Paging walks every order once, in order.
	var walked []string
	for _, page := range []string{"1", "2"} {
		var got []order
		p := paginationOf(t, esimctl(t, env, "orders", "list", "--account", acct, "--env", "sandbox", "--limit", "2", "--page", page, "--json").ok(t).data(t, &got))
		walked = append(walked, ids(got)...)
		if p.Total != 3 || p.HasMore != (page == "1") {
			t.Errorf("orders list --page %s: pagination %+v", page, p)
		}
	}
	if strings.Join(walked, " ") != strings.Join(ids(all), " ") {
		t.Errorf("pages of 2 walk %v, want %v", walked, ids(all))
	}

	// The table.
	table := esimctl(t, env, "orders", "list", "--account", acct, "--env", "sandbox", "--limit", "2").ok(t).stdout
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	total := money.Decimal(perDay.GetPrice().GetTotalMinor())
	created := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	if len(lines) != 4 || !regexp.MustCompile(`^ID\s+STATUS\s+PLAN\s+QUANTITY\s+TOTAL\s+CURRENCY\s+REFERENCE\s+CREATED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+failed.GetId()+`\s+failed\s+`+failed.GetPlanId()+`\s+1\s+`+regexp.QuoteMeta(money.Decimal(failed.GetPrice().GetTotalMinor()))+`\s+USD\s+sandbox:provider_error\s+`+created+`$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^`+perDay.GetId()+`\s+completed\s+`+perDay.GetPlanId()+`\s+1\s+`+regexp.QuoteMeta(total)+`\s+USD\s+BOOK-2\s+`+created+`$`).MatchString(lines[2]) ||
		lines[3] != "page 1 of 2 (3 orders; --page 2 for the next)" {
		t.Errorf("orders list table:\n%s", table)
	}
	if text := esimctl(t, env, "orders", "list", "--account", acct, "--env", "live").ok(t).stdout; text != "account "+acct+" has no live orders\n" {
		t.Errorf("orders list of an environment without orders: %q", text)
	}
	if text := esimctl(t, env, "orders", "list", "--account", acct, "--env", "sandbox", "--status", "pending").ok(t).stdout; text != "no orders on page 1 (0 in total)\n" {
		t.Errorf("orders list with a filter nothing matches: %q", text)
	}
	var others []order
	esimctl(t, env, "orders", "list", "--account", strings.ToUpper(other), "--env", "sandbox", "--json").ok(t).data(t, &others)
	if len(others) != 1 || others[0].ID != elsewhere.GetId() {
		t.Errorf("orders list of the other account: %v, want just %s", ids(others), elsewhere.GetId())
	}

	// get: the order of any account, no scope needed, with every eSIM.
	var got order
	esimctl(t, env, "orders", "get", fixed.GetId(), "--json").ok(t).data(t, &got)
	if got.ID != fixed.GetId() || got.AccountID != acct || got.Price.TotalMinor != fixed.GetPrice().GetTotalMinor() || len(got.Esims) != 2 {
		t.Fatalf("orders get --json = %+v", got)
	}
	for i, e := range got.Esims {
		want := fixed.GetEsims()[i]
		if e.ID != want.GetId() || e.OrderID != fixed.GetId() || e.ICCID != want.GetIccid() || e.ActivationCode != want.GetActivationCode() ||
			e.QRCodeURL != want.GetQrCodeUrl() || e.MatchingID != want.GetMatchingId() || e.Status != "ALLOCATED" ||
			!strings.HasPrefix(e.ActivationCode, "LPA:1$"+e.SMDPAddress+"$") || e.Install.Instructions == "" || e.Data.Unlimited || e.Data.TotalBytes == nil {
			t.Errorf("eSIM %d of orders get --json = %+v, want %v", i, e, want)
		}
	}
	text := esimctl(t, env, "orders", "get", strings.ToUpper(fixed.GetId())).ok(t).stdout
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^id:\s+` + fixed.GetId() + `$`),
		regexp.MustCompile(`(?m)^account:\s+` + acct + `$`),
		regexp.MustCompile(`(?m)^status:\s+completed$`),
		regexp.MustCompile(`(?m)^quantity:\s+2$`),
		regexp.MustCompile(`(?m)^total:\s+` + regexp.QuoteMeta(money.Decimal(fixed.GetPrice().GetTotalMinor())) + ` USD$`),
		regexp.MustCompile(`(?m)^reference:\s+BOOK-1$`),
		regexp.MustCompile(`(?m)^ICCID\s+STATUS\s+ACTIVATION CODE\s+QR CODE URL$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("orders get text lacks %s:\n%s", want, text)
		}
	}
	for _, e := range fixed.GetEsims() {
		line := regexp.MustCompile(`(?m)^` + e.GetIccid() + `\s+ALLOCATED\s+` + regexp.QuoteMeta(e.GetActivationCode()) + `\s+` + regexp.QuoteMeta(e.GetQrCodeUrl()) + `$`)
		if !line.MatchString(text) {
			t.Errorf("orders get text has no line for eSIM %s:\n%s", e.GetIccid(), text)
		}
	}
	if text := esimctl(t, env, "orders", "get", perDay.GetId()).ok(t).stdout; !regexp.MustCompile(`(?m)^days:\s+7$`).MatchString(text) {
		t.Errorf("orders get of a per-day order shows no days:\n%s", text)
	}
	failedText := esimctl(t, env, "orders", "get", failed.GetId()).ok(t).stdout
	if !regexp.MustCompile(`(?m)^status:\s+failed$`).MatchString(failedText) || !regexp.MustCompile(`(?m)^error:\s+provider_error: `).MatchString(failedText) ||
		!regexp.MustCompile(`(?m)^esims:\s+0$`).MatchString(failedText) || strings.Contains(failedText, "ICCID") {
		t.Errorf("orders get of a failed order:\n%s", failedText)
	}
	var otherOrder order
	esimctl(t, env, "orders", "get", "--order", elsewhere.GetId(), "--json").ok(t).data(t, &otherOrder)
	if otherOrder.AccountID != other {
		t.Errorf("orders get of another account's order = %+v", otherOrder)
	}

	const unknownID = "0193e000-0000-7000-8000-000000000000"
	esimctl(t, env, "orders", "get", unknownID).wantError(t, 1, "esimctl: get order "+unknownID+": not found")
	esimctl(t, env, "orders", "get", strings.ToUpper(unknownID), "--json").wantError(t, 1, "esimctl: get order "+unknownID+": not found")
}

// Every wrong flag or argument of the orders commands is a usage error
// (exit 2) found before ordering is called; a failure names ordering and
// its settings.
func TestOrdersUsageErrors(t *testing.T) {
	_, orderingURL, _ := startOrdering(t)
	countedURL, calls := counted(t, orderingURL)
	env := map[string]string{"ESIM_ORDERING_URL": countedURL}
	acct := newAccounts(t, env, 1)[0]
	list := func(flags ...string) []string {
		return append([]string{"orders", "list", "--account", acct, "--env", "sandbox"}, flags...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{list("--status", "shipped"), `esimctl: invalid --status "shipped": want pending, completed or failed`},
		{list("--status", ""), `esimctl: invalid --status "": want pending, completed or failed`},
		{list("--reference", ""), `esimctl: invalid --reference "": want a customer reference, up to 120 characters`},
		{list("--limit", "101"), "esimctl: invalid --limit 101: want 1 to 100"},
		{list("--page", "0", "--json"), "esimctl: invalid --page 0: want 1 to 10000"},
		{[]string{"orders", "list", "--account", acct, "--env", "test"}, `esimctl: invalid --env "test": want sandbox or live`},
		{[]string{"orders", "list", "--account", "acme", "--env", "live"}, `esimctl: invalid --account "acme": not a UUID`},
		{[]string{"orders", "list", "--account", acct}, `esimctl: required flag(s) "env" not set`},
		{[]string{"orders", "get"}, "esimctl: orders get: missing --order ID (or the id alone, as ORDER_ID)"},
		{[]string{"orders", "get", acct, acct}, "esimctl: orders get takes at most 1 argument: ORDER_ID (got 2)"},
		{[]string{"orders", "get", "not-an-order"}, `esimctl: invalid ORDER_ID "not-an-order": not a UUID`},
		{[]string{"orders", "get", "--order", "not-an-order"}, `esimctl: invalid --order "not-an-order": not a UUID`},
		{[]string{"orders", "get", "--order", acct, "0193e000-0000-7000-8000-000000000000"}, `esimctl: orders get: --order "` + acct + `" and ORDER_ID "0193e000-0000-7000-8000-000000000000" disagree: give the id once`},
		{[]string{"orders", "get", "urn:uuid:" + acct, "--json"}, `esimctl: invalid ORDER_ID "urn:uuid:` + acct + `": not a UUID`},
	} {
		r := esimctl(t, env, tc.args...)
		r.wantError(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); first != tc.want {
			t.Errorf("esimctl %s: error line %q, want %q", strings.Join(tc.args, " "), first, tc.want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("usage errors reached ordering: %d calls, want none", n)
	}

	// A filter only ordering refuses is a usage error too.
	esimctl(t, env, list("--reference", strings.Repeat("r", 121))...).wantError(t, 2, "esimctl: list sandbox orders of account "+acct+": reference: ")

	// Addresses: ordering's own flag and variable; the others are not
	// checked.
	esimctl(t, map[string]string{"ESIM_ORDERING_URL": "127.0.0.1:8084"}, "orders", "get", acct).
		wantError(t, 2, `esimctl: invalid --ordering-url: "127.0.0.1:8084" is not an http:// or https:// base URL`, "(set by --ordering-url or ESIM_ORDERING_URL)")
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": env["ESIM_ACCOUNTS_URL"]}, "--ordering-url", "http://127.0.0.1:1", "orders", "list", "--account", acct, "--env", "sandbox").
		wantError(t, 1, "esimctl: list sandbox orders of account "+acct+": cannot reach the ordering service at http://127.0.0.1:1", "--ordering-url / ESIM_ORDERING_URL")
	// orders list reads the account first, so the accounts address is its
	// business too, and a malformed one is found before any call.
	before := calls.Load()
	esimctl(t, map[string]string{"ESIM_ORDERING_URL": countedURL, "ESIM_ACCOUNTS_URL": "notaurl"}, list()...).
		wantError(t, 2, `esimctl: invalid --accounts-url: "notaurl"`)
	if n := calls.Load() - before; n != 0 {
		t.Errorf("with a malformed --accounts-url, ordering was called %d times", n)
	}
	var none []order
	esimctl(t, map[string]string{"ESIM_ORDERING_URL": orderingURL + "/", "ESIM_ACCOUNTS_URL": env["ESIM_ACCOUNTS_URL"] + "/", "ESIM_WALLET_URL": "notaurl", "ESIM_CATALOGUE_URL": "notaurl"},
		"orders", "list", "--account", acct, "--env", "sandbox", "--json").ok(t).data(t, &none)
	if len(none) != 0 {
		t.Errorf("orders of a fresh account: %+v", none)
	}
}

// TestProviderCheck: esimctl provider check calls the live SM-DP+ over
// ES2+ and says it answered; with a CA that does not sign the SM-DP+'s
// certificate it says why it failed; without an SM-DP+ it says there is
// none; the sandbox is always there.
func TestProviderCheck(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	deps := orderingtest.StartDeps(t, nil)
	cfg := deps.Config(t)
	cfg.SMDP = orderingtest.SMDP(sim, "esim-travel", 5*time.Second)
	_, good := orderingtest.Start(t, cfg)
	other, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg = deps.Config(t)
	cfg.SMDP = orderingtest.SMDP(sim, "esim-travel", 5*time.Second)
	cfg.SMDP.CAFile = other.CACert
	_, untrusting := orderingtest.Start(t, cfg)
	_, none := orderingtest.Start(t, deps.Config(t))

	var v struct {
		Environment, Provider, Target, Detail string
		OK                                    bool
	}
	esimctl(t, nil, "--ordering-url", good, "provider", "check", "--json").ok(t).data(t, &v)
	if !v.OK || v.Provider != "es2plus" || v.Target != sim.ES2PlusURL || v.Environment != "live" || !strings.Contains(v.Detail, "Failed 8.2.1/3.9") {
		t.Errorf("check of a working SM-DP+: %+v", v)
	}
	out := esimctl(t, nil, "--ordering-url", good, "provider", "check").ok(t).stdout
	if !strings.Contains(out, "live: the es2plus provider at "+sim.ES2PlusURL+" answered") {
		t.Errorf("check printed:\n%s", out)
	}
	esimctl(t, nil, "--ordering-url", untrusting, "provider", "check").
		wantError(t, 1, "the live provider (es2plus at "+sim.ES2PlusURL+") did not answer", "transport error", "certificate")
	esimctl(t, nil, "--ordering-url", none, "provider", "check").wantError(t, 1, "live has no provider")
	esimctl(t, nil, "--ordering-url", none, "provider", "check", "--env", "sandbox").ok(t)
	esimctl(t, nil, "--ordering-url", none, "provider", "check", "--env", "moon").wantError(t, 2, `invalid --env "moon"`)
	if calls := sim.State(t).Calls["cancelOrder"]; calls["failed"] != 2 {
		t.Errorf("the SM-DP+ saw cancelOrders %v; want the two checks that reached it, refused", calls)
	}
}
