package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering"
)

// esim is an eSIM as esimctl prints it with --json.
type esim struct {
	ID          string   `json:"id"`
	OrderID     string   `json:"order_id"`
	AccountID   string   `json:"account_id"`
	Environment string   `json:"environment"`
	PlanID      string   `json:"plan_id"`
	PerDay      bool     `json:"per_day"`
	Countries   []string `json:"countries"`
	ICCID       string   `json:"iccid"`
	Status      string   `json:"status"`
	Data        struct {
		Unlimited      bool    `json:"unlimited"`
		TotalBytes     *int64  `json:"total_bytes"`
		UsedBytes      int64   `json:"used_bytes"`
		RemainingBytes *int64  `json:"remaining_bytes"`
		UpdatedAt      *string `json:"updated_at"`
	} `json:"data"`
	InstalledAt *string `json:"installed_at"`
	ActivatedAt *string `json:"activated_at"`
	ExpiresAt   *string `json:"expires_at"`
	TopUps      []struct {
		ID     string `json:"id"`
		EsimID string `json:"esim_id"`
		PlanID string `json:"plan_id"`
		Days   int32  `json:"days"`
		Bytes  int64  `json:"bytes"`
		Price  struct {
			AmountMinor int64  `json:"amount_minor"`
			Currency    string `json:"currency"`
		} `json:"price"`
		Status string `json:"status"`
	} `json:"topups"`
}

func esimIDs(esims []esim) []string {
	out := make([]string, len(esims))
	for i, e := range esims {
		out[i] = e.ID
	}
	return out
}

// topUp buys plan for the sandbox eSIM as the gateway does for a partner.
func topUp(t *testing.T, client orderingv1.Ordering, accountID, esimID, planSlug string) *orderingv1.TopUp {
	t.Helper()
	resp, err := client.CreateTopUp(context.Background(), &orderingv1.CreateTopUpRequest{
		Scope:    &orderingv1.Scope{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
		Currency: "USD", IdempotencyKey: uuid.NewString(), EsimId: esimID, PlanId: catalogue.SeedPlanID(planSlug).String(),
	})
	if err != nil {
		t.Fatalf("top up eSIM %s with %s: %v", esimID, planSlug, err)
	}
	return resp.GetTopup()
}

// An eSIM walked through its life with esims simulate shows each status
// and field in esims get, and is found by esims list's filters.
func TestEsimsSimulateGetAndList(t *testing.T) {
	deps, orderingURL, client := startOrdering(t)
	env := map[string]string{"ESIM_ORDERING_URL": orderingURL}
	accts := newAccounts(t, env, 2)
	acct, other := accts[0], accts[1]
	deps.TopUp(t, acct, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 1000_00, "seed")
	deps.TopUp(t, other, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 1000_00, "seed")
	fixed := placeOrder(t, client, acct, "jp-5gb-30d", 2, 0, "BOOK-1")
	perDay := placeOrder(t, client, acct, "jp-unlimited-day", 1, 3, "BOOK-2")
	elsewhere := placeOrder(t, client, other, "jp-1gb-7d", 1, 0, "BOOK-3")
	walked, idle := fixed.GetEsims()[0], fixed.GetEsims()[1]
	const total = 5 << 30

	simulate := func(action string, flags ...string) esim {
		t.Helper()
		var e esim
		args := append([]string{"esims", "simulate", "--esim", walked.GetId(), "--account", acct, "--action", action, "--json"}, flags...)
		esimctl(t, env, args...).ok(t).data(t, &e)
		return e
	}
	e := simulate("install")
	if e.ID != walked.GetId() || e.Status != "INSTALLED" || e.InstalledAt == nil || e.ActivatedAt != nil || e.ExpiresAt != nil {
		t.Errorf("after install: %+v", e)
	}
	e = simulate("activate")
	if e.Status != "ACTIVE" || e.ActivatedAt == nil || e.ExpiresAt == nil || e.InstalledAt == nil {
		t.Errorf("after activate: %+v", e)
	}
	e = simulate("consume", "--bytes", "3GB")
	if e.Status != "ACTIVE" || e.Data.UsedBytes != 3<<30 || e.Data.TotalBytes == nil || *e.Data.TotalBytes != total ||
		e.Data.RemainingBytes == nil || *e.Data.RemainingBytes != 2<<30 {
		t.Errorf("after consuming 3 GB of 5: %+v", e)
	}
	e = simulate("consume", "--bytes", strconv.Itoa(3<<30))
	if e.Status != "DEPLETED" || e.Data.UsedBytes != total || *e.Data.RemainingBytes != 0 {
		t.Errorf("after consuming past the total: %+v", e)
	}
	bought := topUp(t, client, acct, walked.GetId(), "jp-1gb-7d")

	var got esim
	esimctl(t, env, "esims", "get", walked.GetId(), "--json").ok(t).data(t, &got)
	if got.ID != walked.GetId() || got.OrderID != fixed.GetId() || got.AccountID != acct || got.Environment != "sandbox" ||
		got.PlanID != fixed.GetPlanId() || got.PerDay || strings.Join(got.Countries, ",") != "JP" || got.ICCID != walked.GetIccid() ||
		got.Status != "ACTIVE" || *got.Data.TotalBytes != total+1<<30 || *got.Data.RemainingBytes != 1<<30 {
		t.Errorf("esims get --json after a top-up = %+v", got)
	}
	if len(got.TopUps) != 1 || got.TopUps[0].ID != bought.GetId() || got.TopUps[0].EsimID != walked.GetId() || got.TopUps[0].Status != "completed" ||
		got.TopUps[0].Bytes != 1<<30 || got.TopUps[0].Days != 7 || got.TopUps[0].Price.AmountMinor != bought.GetPrice().GetTotalMinor() || got.TopUps[0].Price.Currency != "USD" {
		t.Errorf("esims get --json top-ups = %+v, want %v", got.TopUps, bought)
	}
	text := esimctl(t, env, "esims", "get", strings.ToUpper(walked.GetId())).ok(t).stdout
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^id:\s+` + walked.GetId() + `$`),
		regexp.MustCompile(`(?m)^order:\s+` + fixed.GetId() + `$`),
		regexp.MustCompile(`(?m)^iccid:\s+` + walked.GetIccid() + `$`),
		regexp.MustCompile(`(?m)^status:\s+ACTIVE$`),
		regexp.MustCompile(`(?m)^installed:\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`),
		regexp.MustCompile(`(?m)^activated:\s+\d{4}-`),
		regexp.MustCompile(`(?m)^expires:\s+\d{4}-`),
		regexp.MustCompile(`(?m)^data total:\s+6442450944 bytes \(6 GB\)$`),
		regexp.MustCompile(`(?m)^data used:\s+5368709120 bytes \(5 GB\)$`),
		regexp.MustCompile(`(?m)^data remaining:\s+1073741824 bytes \(1 GB\)$`),
		regexp.MustCompile(`(?m)^top-ups:\s+1$`),
		regexp.MustCompile(`(?m)^ID\s+STATUS\s+PLAN\s+DAYS\s+DATA\s+PRICE\s+CREATED$`),
		regexp.MustCompile(`(?m)^` + bought.GetId() + `\s+completed\s+` + bought.GetPlanId() + `\s+7\s+1 GB\s+` + regexp.QuoteMeta(priceText(bought.GetPrice().GetTotalMinor(), "USD")) + `\s+\d{4}-\d\d-\d\dT\S+Z$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("esims get text lacks %s:\n%s", want, text)
		}
	}
	idleText := esimctl(t, env, "esims", "get", idle.GetId()).ok(t).stdout
	for _, want := range []string{"status:", "ALLOCATED", "installed:", "activated:", "expires:"} {
		if !strings.Contains(idleText, want) {
			t.Errorf("esims get of a fresh eSIM lacks %q:\n%s", want, idleText)
		}
	}
	if !regexp.MustCompile(`(?m)^expires:\s+-$`).MatchString(idleText) || !regexp.MustCompile(`(?m)^top-ups:\s+0$`).MatchString(idleText) ||
		strings.Contains(idleText, "CREATED") {
		t.Errorf("esims get of a fresh eSIM:\n%s", idleText)
	}
	unlimited := esimctl(t, env, "esims", "get", perDay.GetEsims()[0].GetId()).ok(t).stdout
	if !regexp.MustCompile(`(?m)^data total:\s+unlimited$`).MatchString(unlimited) || !regexp.MustCompile(`(?m)^data remaining:\s+unlimited$`).MatchString(unlimited) {
		t.Errorf("esims get of a per-day eSIM:\n%s", unlimited)
	}

	e = simulate("expire")
	if e.Status != "EXPIRED" || e.ExpiresAt == nil {
		t.Errorf("after expire: %+v", e)
	}
	// The text of a simulation is the eSIM as get shows it.
	installed := esimctl(t, env, "esims", "simulate", idle.GetId(), "--account", acct, "--action", "INSTALL").ok(t).stdout
	if !regexp.MustCompile(`(?m)^status:\s+INSTALLED$`).MatchString(installed) || !regexp.MustCompile(`(?m)^id:\s+`+idle.GetId()+`$`).MatchString(installed) {
		t.Errorf("esims simulate text:\n%s", installed)
	}

	// Lists: newest first, an account's own, and every account's.
	var mine []esim
	p := paginationOf(t, esimctl(t, env, "esims", "list", "--account", acct, "--env", "sandbox", "--json").ok(t).data(t, &mine))
	if len(mine) != 3 || p != (pagination{Page: 1, Limit: ordering.DefaultPageLimit, Total: 3}) || mine[0].ID != perDay.GetEsims()[0].GetId() {
		t.Fatalf("esims list of the account: %v, %+v", esimIDs(mine), p)
	}
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"--account", acct, "--env", "sandbox", "--status", "expired"}, []string{walked.GetId()}},
		{[]string{"--account", acct, "--env", "sandbox", "--status", "INSTALLED"}, []string{idle.GetId()}},
		{[]string{"--account", acct, "--env", "sandbox", "--status", "ALLOCATED"}, []string{perDay.GetEsims()[0].GetId()}},
		{[]string{"--account", acct, "--env", "sandbox", "--status", "DEPLETED"}, []string{}},
		{[]string{"--iccid", walked.GetIccid()}, []string{walked.GetId()}},
		{[]string{"--iccid", elsewhere.GetEsims()[0].GetIccid()}, []string{elsewhere.GetEsims()[0].GetId()}},
		{[]string{"--account", acct, "--env", "sandbox", "--iccid", elsewhere.GetEsims()[0].GetIccid()}, []string{}},
		{[]string{"--order", fixed.GetId()}, []string{idle.GetId(), walked.GetId()}},
		{[]string{"--account", other, "--env", "sandbox"}, []string{elsewhere.GetEsims()[0].GetId()}},
		{[]string{"--account", acct, "--env", "live"}, []string{}},
	} {
		var got []esim
		args := append([]string{"esims", "list", "--json"}, tc.flags...)
		p := paginationOf(t, esimctl(t, env, args...).ok(t).data(t, &got))
		if strings.Join(esimIDs(got), " ") != strings.Join(tc.want, " ") || p.Total != int32(len(tc.want)) {
			t.Errorf("esims list %s: %v (total %d), want %v", strings.Join(tc.flags, " "), esimIDs(got), p.Total, tc.want)
		}
	}
	var everyone []esim
	esimctl(t, env, "esims", "list", "--json").ok(t).data(t, &everyone)
	if len(everyone) != 4 {
		t.Errorf("esims list of every account: %v, want the 4 eSIMs", esimIDs(everyone))
	}
	var walkedPages []string
	for _, page := range []string{"1", "2"} {
		var got []esim
		p := paginationOf(t, esimctl(t, env, "esims", "list", "--account", acct, "--env", "sandbox", "--limit", "2", "--page", page, "--json").ok(t).data(t, &got))
		walkedPages = append(walkedPages, esimIDs(got)...)
		if p.Total != 3 || p.HasMore != (page == "1") {
			t.Errorf("esims list --page %s: pagination %+v", page, p)
		}
	}
	if strings.Join(walkedPages, " ") != strings.Join(esimIDs(mine), " ") {
		t.Errorf("pages of 2 walk %v, want %v", walkedPages, esimIDs(mine))
	}

	table := esimctl(t, env, "esims", "list", "--account", acct, "--env", "sandbox", "--limit", "2", "--page", "2").ok(t).stdout
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+ICCID\s+STATUS\s+PLAN\s+DATA USED\s+EXPIRES\s+ORDER\s+CREATED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+walked.GetId()+`\s+`+walked.GetIccid()+`\s+EXPIRED\s+.+\s+5 GB of 6 GB\s+\d{4}-\S+\s+`+fixed.GetId()+`\s+\d{4}-\d\d-\d\dT\S+Z$`).MatchString(lines[1]) ||
		lines[2] != "page 2 of 2 (3 eSIMs; the last)" {
		t.Errorf("esims list table:\n%s", table)
	}
	if text := esimctl(t, env, "esims", "list", "--account", acct, "--env", "live").ok(t).stdout; text != "account "+acct+" has no live eSIMs\n" {
		t.Errorf("esims list of an environment without eSIMs: %q", text)
	}
	if text := esimctl(t, env, "esims", "list", "--status", "DEPLETED").ok(t).stdout; text != "no eSIMs on page 1 (0 in total)\n" {
		t.Errorf("esims list with a filter nothing matches: %q", text)
	}

	// What ordering refuses: an action out of order, another account's
	// eSIM, an unknown one.
	esimctl(t, env, "esims", "simulate", walked.GetId(), "--account", acct, "--action", "activate").
		wantError(t, 2, "esimctl: simulate activate on eSIM "+walked.GetId()+": action: ")
	esimctl(t, env, "esims", "simulate", perDay.GetEsims()[0].GetId(), "--account", acct, "--action", "consume", "--bytes", "1").
		wantError(t, 2, "esimctl: simulate consume on eSIM "+perDay.GetEsims()[0].GetId()+": action: ")
	esimctl(t, env, "esims", "simulate", elsewhere.GetEsims()[0].GetId(), "--account", acct, "--action", "install").
		wantError(t, 1, "esimctl: simulate install on eSIM "+elsewhere.GetEsims()[0].GetId()+": not found")
	var untouched esim
	esimctl(t, env, "esims", "get", "--esim", elsewhere.GetEsims()[0].GetId(), "--json").ok(t).data(t, &untouched)
	if untouched.Status != "ALLOCATED" || untouched.InstalledAt != nil {
		t.Errorf("another account's eSIM after a refused simulation: %+v", untouched)
	}
	var still esim
	esimctl(t, env, "esims", "get", perDay.GetEsims()[0].GetId(), "--json").ok(t).data(t, &still)
	if still.Status != "ALLOCATED" || still.Data.UsedBytes != 0 {
		t.Errorf("an eSIM after a refused consume: %+v", still)
	}
	const unknownID = "0193e000-0000-7000-8000-000000000000"
	esimctl(t, env, "esims", "get", unknownID).wantError(t, 1, "esimctl: get eSIM "+unknownID+": not found")
	esimctl(t, env, "esims", "simulate", unknownID, "--account", acct, "--action", "expire").wantError(t, 1, "esimctl: simulate expire on eSIM "+unknownID+": not found")
}

// Every wrong flag or argument of the esims commands is a usage error
// (exit 2) found before ordering is called.
func TestEsimsUsageErrors(t *testing.T) {
	_, orderingURL, _ := startOrdering(t)
	countedURL, calls := counted(t, orderingURL)
	env := map[string]string{"ESIM_ORDERING_URL": countedURL}
	acct, id := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	simulate := func(flags ...string) []string {
		return append([]string{"esims", "simulate", id, "--account", acct}, flags...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"esims", "list", "--status", "shipped"}, `esimctl: invalid --status "shipped": want ALLOCATED, INSTALLED, ACTIVE, DEPLETED or EXPIRED`},
		{[]string{"esims", "list", "--status", ""}, `esimctl: invalid --status "": want ALLOCATED, INSTALLED, ACTIVE, DEPLETED or EXPIRED`},
		{[]string{"esims", "list", "--iccid", ""}, `esimctl: invalid --iccid "": want an ICCID, up to 22 digits`},
		{[]string{"esims", "list", "--iccid", "89-44"}, `esimctl: invalid --iccid "89-44": want an ICCID, up to 22 digits`},
		{[]string{"esims", "list", "--iccid", strings.Repeat("8", 23)}, `esimctl: invalid --iccid "` + strings.Repeat("8", 23) + `": want an ICCID, up to 22 digits`},
		{[]string{"esims", "list", "--order", "BOOK-1"}, `esimctl: invalid --order "BOOK-1": not a UUID`},
		{[]string{"esims", "list", "--account", acct}, "esimctl: --account needs --env (sandbox or live): an account's eSIMs are listed one environment at a time"},
		{[]string{"esims", "list", "--env", "live"}, "esimctl: --env needs --account: without both, every account's eSIMs are listed"},
		{[]string{"esims", "list", "--account", acct, "--env", "test"}, `esimctl: invalid --env "test": want sandbox or live`},
		{[]string{"esims", "list", "--account", "acme", "--env", "live"}, `esimctl: invalid --account "acme": not a UUID`},
		{[]string{"esims", "list", "--limit", "101"}, "esimctl: invalid --limit 101: want 1 to 100"},
		{[]string{"esims", "list", "--page", "0", "--json"}, "esimctl: invalid --page 0: want 1 to 10000"},
		{[]string{"esims", "get"}, "esimctl: esims get: missing --esim ID (or the id alone, as ESIM_ID)"},
		{[]string{"esims", "get", id, id}, "esimctl: esims get takes at most 1 argument: ESIM_ID (got 2)"},
		{[]string{"esims", "get", "8944500102198304826"}, `esimctl: invalid ESIM_ID "8944500102198304826": not a UUID`},
		{[]string{"esims", "get", "--esim", "8944500102198304826"}, `esimctl: invalid --esim "8944500102198304826": not a UUID`},
		{[]string{"esims", "simulate", "--account", acct, "--action", "install"}, "esimctl: esims simulate: missing --esim ID (or the id alone, as ESIM_ID)"},
		{[]string{"esims", "simulate", "x", "--account", acct, "--action", "install"}, `esimctl: invalid ESIM_ID "x": not a UUID`},
		{[]string{"esims", "simulate", "--esim", "x", "--account", acct, "--action", "install"}, `esimctl: invalid --esim "x": not a UUID`},
		{[]string{"esims", "simulate", id, "--action", "install"}, `esimctl: required flag(s) "account" not set`},
		{[]string{"esims", "simulate", id, "--account", acct}, `esimctl: required flag(s) "action" not set`},
		{[]string{"esims", "simulate", id, "--account", "acme", "--action", "install"}, `esimctl: invalid --account "acme": not a UUID`},
		{simulate("--action", "uninstall"), `esimctl: invalid --action "uninstall": want install, activate, consume or expire`},
		{simulate("--action", ""), `esimctl: invalid --action "": want install, activate, consume or expire`},
		{simulate("--action", "consume"), "esimctl: --action consume needs --bytes: the data used"},
		{simulate("--action", "install", "--bytes", "100"), "esimctl: --bytes goes with --action consume only"},
		{simulate("--action", "consume", "--bytes", "0"), `esimctl: invalid --bytes "0": want a whole number of bytes, at least 1, or of KB, MB or GB (such as 600MB)`},
		{simulate("--action", "consume", "--bytes", "-5"), `esimctl: invalid --bytes "-5": want a whole number of bytes, at least 1, or of KB, MB or GB (such as 600MB)`},
		{simulate("--action", "consume", "--bytes", "1.5GB"), `esimctl: invalid --bytes "1.5GB": want a whole number of bytes, at least 1, or of KB, MB or GB (such as 600MB)`},
		{simulate("--action", "consume", "--bytes", "lots"), `esimctl: invalid --bytes "lots": want a whole number of bytes, at least 1, or of KB, MB or GB (such as 600MB)`},
		{simulate("--action", "consume", "--bytes", "9999999999GB"), `esimctl: invalid --bytes "9999999999GB": want a whole number of bytes, at least 1, or of KB, MB or GB (such as 600MB)`},
		{simulate("--action", "consume", "--bytes", ""), `esimctl: invalid --bytes "": want a whole number of bytes, at least 1, or of KB, MB or GB (such as 600MB)`},
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
	// Units are those plans are sold in.
	for in, want := range map[string]int64{"1": 1, "600MB": 600 << 20, "3gb": 3 << 30, "2 KB": 2 << 10, "10B": 10} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
