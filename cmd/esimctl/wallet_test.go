package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/money"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/wallet"
	walletserver "github.com/esimplatform/esim/services/wallet/server"
)

// startWallet runs the real wallet service on its own fresh database.
func startWallet(t *testing.T) string {
	t.Helper()
	srv, err := walletserver.New(context.Background(),
		walletserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), Callers: internalauthtest.Callers()}, newTelemetry(t, "wallet"))
	if err != nil {
		t.Fatalf("wallet server: %v", err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// entry is a ledger entry as esimctl prints it with --json.
type entry struct {
	ID                string  `json:"id"`
	AccountID         string  `json:"account_id"`
	Environment       string  `json:"environment"`
	Kind              string  `json:"kind"`
	AmountMinor       int64   `json:"amount_minor"`
	Currency          string  `json:"currency"`
	Reference         string  `json:"reference"`
	BalanceAfterMinor int64   `json:"balance_after_minor"`
	Actor             string  `json:"actor"`
	Note              *string `json:"note"`
	CreatedAt         *string `json:"created_at"`
}

type balance struct {
	AccountID   string  `json:"account_id"`
	Environment string  `json:"environment"`
	AmountMinor int64   `json:"amount_minor"`
	Currency    string  `json:"currency"`
	UpdatedAt   *string `json:"updated_at"`
}

// walletEnv starts accounts and the wallet and creates an account in
// currency: the environment to run wallet commands in, and the account.
func walletEnv(t *testing.T, currency string) (map[string]string, account) {
	t.Helper()
	env := map[string]string{"ESIM_ACCOUNTS_URL": startAccounts(t), "ESIM_WALLET_URL": startWallet(t)}
	var acct account
	esimctl(t, env, "accounts", "create", "--name", "Wallet Travel", "--currency", currency, "--json").ok(t).data(t, &acct)
	return env, acct
}

// balanceOf reads a balance through esimctl, in minor units.
func balanceOf(t *testing.T, env map[string]string, accountID, environment string) int64 {
	t.Helper()
	var b balance
	esimctl(t, env, "wallet", "balance", "--account", accountID, "--env", environment, "--json").ok(t).data(t, &b)
	return b.AmountMinor
}

var generatedReference = regexp.MustCompile(`reference (\S+) was made for this top-up: running the command again with --reference (\S+) is safe`)

func TestWalletTopUpBalanceAndLedger(t *testing.T) {
	env, acct := walletEnv(t, "EUR")

	// Never topped up: 0 in the account's currency.
	var b balance
	raw := esimctl(t, env, "wallet", "balance", "--account", acct.ID, "--env", "sandbox", "--json").ok(t).data(t, &b)
	if b.AmountMinor != 0 || b.Currency != "EUR" || b.Environment != "sandbox" || b.AccountID != acct.ID || b.UpdatedAt != nil {
		t.Errorf("balance before any top-up = %+v", b)
	}
	if !strings.Contains(string(raw["data"]), `"amount": 0.00`) {
		t.Errorf("balance --json amount is not written with two decimals:\n%s", raw["data"])
	}

	// A top-up with a reference: exact amounts, the actor and the note.
	var first entry
	raw = esimctl(t, env, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "100.5",
		"--reference", "INV-2041", "--note", "invoice 2041", "--json").ok(t).data(t, &first)
	note := "invoice 2041"
	if first.ID == "" || first.AccountID != acct.ID || first.Environment != "sandbox" || first.Kind != "top_up" ||
		first.AmountMinor != 100_50 || first.Currency != "EUR" || first.BalanceAfterMinor != 100_50 ||
		first.Reference != "INV-2041" || first.Actor != "operator" || first.Note == nil || *first.Note != note || first.CreatedAt == nil {
		t.Fatalf("top-up entry = %+v", first)
	}
	for _, want := range []string{`"amount": 100.50`, `"balance_after": 100.50`} {
		if !strings.Contains(string(raw["data"]), want) {
			t.Errorf("topup --json lacks %s:\n%s", want, raw["data"])
		}
	}

	// Without a reference: one is made, printed, and how to retry said.
	text := esimctl(t, env, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "0.05").ok(t).stdout
	for _, want := range []string{"kind:", "top_up", "amount:", "0.05 EUR", "balance after:", "100.55 EUR", "actor:", "operator",
		"running it again without --reference tops up again"} {
		if !strings.Contains(text, want) {
			t.Errorf("topup text output lacks %q:\n%s", want, text)
		}
	}
	m := generatedReference.FindStringSubmatch(text)
	if m == nil || m[1] != m[2] {
		t.Fatalf("topup without --reference does not give the reference it made:\n%s", text)
	}
	ref := m[1]
	if id, err := uuid.Parse(ref); err != nil || id.Version() != 7 {
		t.Errorf("generated reference %q is not a UUID v7", ref)
	}
	if !regexp.MustCompile(`(?m)^reference:\s+` + ref + `$`).MatchString(text) {
		t.Errorf("topup text output does not show the entry's reference %s:\n%s", ref, text)
	}

	// Running either again with its reference moves nothing and answers
	// the first entry.
	var again entry
	esimctl(t, env, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "100.50", "--reference", "INV-2041", "--json").ok(t).data(t, &again)
	if !reflect.DeepEqual(again, first) {
		t.Errorf("a repeated top-up answered %+v, want the first entry %+v", again, first)
	}
	rerun := esimctl(t, env, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "0.05", "--reference", ref).ok(t).stdout
	if generatedReference.MatchString(rerun) || !regexp.MustCompile(`balance after:\s+100.55 EUR`).MatchString(rerun) {
		t.Errorf("a top-up repeated with its reference:\n%s", rerun)
	}
	if got := balanceOf(t, env, acct.ID, "sandbox"); got != 100_55 {
		t.Errorf("balance after repeated top-ups = %d, want 10055", got)
	}
	// The same reference for another amount is refused; nothing moves.
	esimctl(t, env, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "200", "--reference", "INV-2041").
		wantError(t, 1, `top up account `+acct.ID+` sandbox with reference "INV-2041": the reference was used for a top-up of another amount; nothing moved`)
	if got := balanceOf(t, env, acct.ID, "sandbox"); got != 100_55 {
		t.Errorf("balance after a conflicting top-up = %d, want 10055", got)
	}

	balanceText := esimctl(t, env, "wallet", "balance", "--account", acct.ID, "--env", "sandbox").ok(t).stdout
	if !regexp.MustCompile(`(?m)^balance:\s+100.55 EUR$`).MatchString(balanceText) || !strings.HasPrefix(balanceText, "account:") {
		t.Errorf("wallet balance:\n%s", balanceText)
	}

	// The ledger: newest first, each entry once.
	var ledger []entry
	p := paginationOf(t, esimctl(t, env, "wallet", "ledger", "--account", acct.ID, "--env", "sandbox", "--json").ok(t).data(t, &ledger))
	if len(ledger) != 2 || p != (pagination{Page: 1, Limit: wallet.DefaultPageLimit, Total: 2}) {
		t.Fatalf("ledger: %+v, pagination %+v", ledger, p)
	}
	if ledger[0].Reference != ref || ledger[0].AmountMinor != 5 || ledger[0].BalanceAfterMinor != 100_55 || ledger[0].Actor != "operator" || ledger[0].Note != nil ||
		!reflect.DeepEqual(ledger[1], first) {
		t.Errorf("ledger = %+v, want the 0.05 top-up then %+v", ledger, first)
	}
	table := esimctl(t, env, "wallet", "ledger", "--account", acct.ID, "--env", "sandbox").ok(t).stdout
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	created := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+KIND\s+AMOUNT\s+BALANCE AFTER\s+REFERENCE\s+ACTOR\s+CREATED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+ledger[0].ID+`\s+top_up\s+\+0.05 EUR\s+100.55 EUR\s+`+ref+`\s+operator\s+`+created+`$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^`+first.ID+`\s+top_up\s+\+100.50 EUR\s+100.50 EUR\s+INV-2041\s+operator\s+`+created+`$`).MatchString(lines[2]) {
		t.Errorf("wallet ledger table:\n%s", table)
	}
	var second []entry
	p = paginationOf(t, esimctl(t, env, "wallet", "ledger", "--account", acct.ID, "--env", "sandbox", "--limit", "1", "--page", "2", "--json").ok(t).data(t, &second))
	if len(second) != 1 || !reflect.DeepEqual(second[0], first) || p != (pagination{Page: 2, Limit: 1, Total: 2}) {
		t.Errorf("ledger --limit 1 --page 2: %+v, pagination %+v", second, p)
	}
	if text := esimctl(t, env, "wallet", "ledger", "--account", acct.ID, "--env", "sandbox", "--limit", "1").ok(t).stdout; !strings.HasSuffix(text, "page 1 of 2 (2 entries; --page 2 for the next)\n") {
		t.Errorf("ledger --limit 1:\n%s", text)
	}

	// Live money is another balance.
	if got := balanceOf(t, env, acct.ID, "live"); got != 0 {
		t.Errorf("live balance = %d after sandbox top-ups, want 0", got)
	}
	if text := esimctl(t, env, "wallet", "ledger", "--account", acct.ID, "--env", "live").ok(t).stdout; text != "account "+acct.ID+" has no live ledger entries\n" {
		t.Errorf("empty live ledger: %q", text)
	}
	var live entry
	esimctl(t, env, "wallet", "topup", "--account", strings.ToUpper(acct.ID), "--env", "live", "--amount", "7", "--json").ok(t).data(t, &live)
	if live.AmountMinor != 7_00 || live.BalanceAfterMinor != 7_00 || live.Environment != "live" || live.AccountID != acct.ID {
		t.Errorf("live top-up = %+v", live)
	}
	if got := balanceOf(t, env, acct.ID, "sandbox"); got != 100_55 {
		t.Errorf("sandbox balance = %d after a live top-up, want 10055", got)
	}
}

// Every wrong flag of the wallet commands is a usage error (exit 2) found
// before any call: neither service is called and no money moves.
func TestWalletUsageErrors(t *testing.T) {
	direct, acct := walletEnv(t, "USD")
	esimctl(t, direct, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "10", "--reference", "seed").ok(t)

	accountsURL, accountsCalls := counted(t, direct["ESIM_ACCOUNTS_URL"])
	walletURL, walletCalls := counted(t, direct["ESIM_WALLET_URL"])
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, "ESIM_WALLET_URL": walletURL}
	topup := func(flags ...string) []string {
		return append([]string{"wallet", "topup", "--account", acct.ID, "--env", "sandbox"}, flags...)
	}
	maxAmount := money.Decimal(wallet.MaxAmountMinor)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"wallet", "topup", "--account", acct.ID, "--env", "staging", "--amount", "10"}, `esimctl: invalid --env "staging": want sandbox or live`},
		{[]string{"wallet", "topup", "--account", "not-a-uuid", "--env", "sandbox", "--amount", "10"}, `esimctl: invalid --account "not-a-uuid": not a UUID`},
		{topup("--amount", "-5"), `esimctl: invalid --amount "-5": want a plain decimal amount with at most two decimals, such as 12.50`},
		{topup("--amount", "12.345", "--json"), `esimctl: invalid --amount "12.345": want a plain decimal amount with at most two decimals, such as 12.50`},
		{topup("--amount", "1e3"), `esimctl: invalid --amount "1e3": want a plain decimal amount`},
		{topup("--amount", "10,50"), `esimctl: invalid --amount "10,50": want a plain decimal amount`},
		{topup("--amount", ""), `esimctl: invalid --amount "": want a plain decimal amount`},
		{topup("--amount", "0"), `esimctl: invalid --amount "0": want more than 0 and at most ` + maxAmount},
		{topup("--amount", "0.00"), `esimctl: invalid --amount "0.00": want more than 0 and at most ` + maxAmount},
		{topup("--amount", "100000000.01"), `esimctl: invalid --amount "100000000.01": want more than 0 and at most ` + maxAmount},
		{topup("--amount", "10", "--reference", ""), `esimctl: invalid --reference "": want 1 to 255 printable ASCII characters`},
		{topup("--amount", "10", "--reference", "réf"), `esimctl: invalid --reference "réf": want 1 to 255 printable ASCII characters`},
		{topup("--amount", "10", "--reference", strings.Repeat("r", 256)), `esimctl: invalid --reference "rrr`},
		{topup(), `esimctl: required flag(s) "amount" not set`},
		{[]string{"wallet", "topup", "--env", "sandbox", "--amount", "10"}, `esimctl: required flag(s) "account" not set`},
		{[]string{"wallet", "topup", "--account", acct.ID, "--env", "live", "--amount", "10", "x"}, `esimctl: wallet topup takes no arguments, got ["x"]`},
		{[]string{"wallet", "balance", "--account", acct.ID, "--env", "prod"}, `esimctl: invalid --env "prod": want sandbox or live`},
		{[]string{"wallet", "balance", "--account", acct.ID + "0", "--env", "live"}, `esimctl: invalid --account "` + acct.ID + `0": not a UUID`},
		{[]string{"wallet", "balance", "--account", acct.ID}, `esimctl: required flag(s) "env" not set`},
		{[]string{"wallet", "ledger", "--account", acct.ID, "--env", "sandbox", "--limit", "0"}, "esimctl: invalid --limit 0: want 1 to 100"},
		{[]string{"wallet", "ledger", "--account", acct.ID, "--env", "sandbox", "--page", "10001", "--json"}, "esimctl: invalid --page 10001: want 1 to 10000"},
		{[]string{"wallet", "ledger", "--account", "{" + acct.ID + "}", "--env", "sandbox"}, `esimctl: invalid --account "{` + acct.ID + `}": not a UUID`},
		{[]string{"wallet", "frobnicate"}, `esimctl: unknown command "frobnicate" for "esimctl wallet"`},
	} {
		r := esimctl(t, env, tc.args...)
		r.wantError(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.HasPrefix(first, tc.want) {
			t.Errorf("esimctl %s: error line %q, want %q", strings.Join(tc.args, " "), first, tc.want)
		}
		if !strings.Contains(r.stderr, "--help' for usage.") {
			t.Errorf("esimctl %s: no pointer to --help:\n%s", strings.Join(tc.args, " "), r.stderr)
		}
	}
	if n, m := accountsCalls.Load(), walletCalls.Load(); n != 0 || m != 0 {
		t.Errorf("usage errors reached the services: %d accounts calls, %d wallet calls; want none", n, m)
	}

	// An argument only the wallet refuses is a usage error too, and moves
	// nothing.
	esimctl(t, env, topup("--amount", "10", "--note", strings.Repeat("n", 300))...).
		wantError(t, 2, `esimctl: top up account `+acct.ID+` sandbox with reference "`, `": note: `)
	if got := balanceOf(t, direct, acct.ID, "sandbox"); got != 10_00 {
		t.Errorf("balance after refused top-ups = %d, want 1000", got)
	}
}

// An account the accounts service does not know is a failure (exit 1)
// naming it, for every wallet command, and the wallet is never called.
func TestWalletUnknownAccount(t *testing.T) {
	direct, _ := walletEnv(t, "GBP")
	walletURL, walletCalls := counted(t, direct["ESIM_WALLET_URL"])
	env := map[string]string{"ESIM_ACCOUNTS_URL": direct["ESIM_ACCOUNTS_URL"], "ESIM_WALLET_URL": walletURL}
	const unknownID = "0193e000-0000-7000-8000-000000000000"
	for _, args := range [][]string{
		{"wallet", "topup", "--account", unknownID, "--env", "sandbox", "--amount", "10"},
		{"wallet", "topup", "--account", strings.ToUpper(unknownID), "--env", "live", "--amount", "10", "--reference", "r", "--json"},
		{"wallet", "balance", "--account", unknownID, "--env", "sandbox"},
		{"wallet", "ledger", "--account", unknownID, "--env", "live", "--json"},
	} {
		r := esimctl(t, env, args...)
		r.wantError(t, 1, "esimctl: account "+unknownID+" not found")
		if strings.Contains(r.stderr, "Run '") {
			t.Errorf("esimctl %s: a failure points to --help:\n%s", strings.Join(args, " "), r.stderr)
		}
	}
	if n := walletCalls.Load(); n != 0 {
		t.Errorf("the wallet was called %d times for an unknown account, want never", n)
	}
}

// The wallet commands call accounts, then the wallet: both addresses are
// checked before either call, and a failure names the service it came
// from, with its own flag and variable. The ordering address is not
// theirs to check.
func TestWalletServiceURLs(t *testing.T) {
	direct, acct := walletEnv(t, "USD")
	balanceArgs := []string{"wallet", "balance", "--account", acct.ID, "--env", "sandbox"}
	with := func(overrides map[string]string) map[string]string {
		env := map[string]string{"ESIM_ACCOUNTS_URL": direct["ESIM_ACCOUNTS_URL"], "ESIM_WALLET_URL": direct["ESIM_WALLET_URL"]}
		for k, v := range overrides {
			env[k] = v
		}
		return env
	}

	accountsURL, accountsCalls := counted(t, direct["ESIM_ACCOUNTS_URL"])
	esimctl(t, with(map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, "ESIM_WALLET_URL": "127.0.0.1:8083"}), balanceArgs...).
		wantError(t, 2, `esimctl: invalid --wallet-url: "127.0.0.1:8083" is not an http:// or https:// base URL`, "such as http://127.0.0.1:8083 (set by --wallet-url or ESIM_WALLET_URL)")
	if n := accountsCalls.Load(); n != 0 {
		t.Errorf("with a malformed --wallet-url, accounts was called %d times first", n)
	}
	esimctl(t, with(nil), append([]string{"--accounts-url", "localhost"}, balanceArgs...)...).
		wantError(t, 2, "esimctl: invalid --accounts-url: ", "(set by --accounts-url or ESIM_ACCOUNTS_URL)")

	esimctl(t, with(map[string]string{"ESIM_WALLET_URL": "http://127.0.0.1:1"}), balanceArgs...).
		wantError(t, 1, "esimctl: get sandbox balance of account "+acct.ID+": cannot reach the wallet service at http://127.0.0.1:1", "--wallet-url / ESIM_WALLET_URL")
	esimctl(t, with(nil), append([]string{"--accounts-url", "http://127.0.0.1:1"}, balanceArgs...)...).
		wantError(t, 1, "esimctl: get account "+acct.ID+": cannot reach the accounts service at http://127.0.0.1:1", "--accounts-url / ESIM_ACCOUNTS_URL")
	// The accounts service where the wallet should be says so.
	esimctl(t, with(map[string]string{"ESIM_WALLET_URL": direct["ESIM_ACCOUNTS_URL"]}), "wallet", "ledger", "--account", acct.ID, "--env", "live").
		wantError(t, 1, "esimctl: list live ledger of account "+acct.ID+": "+direct["ESIM_ACCOUNTS_URL"]+" does not answer as the wallet service (", "check --wallet-url / ESIM_WALLET_URL")

	// A trailing slash works; a wrong ordering or catalogue URL is no
	// business of the wallet commands.
	esimctl(t, with(map[string]string{"ESIM_WALLET_URL": direct["ESIM_WALLET_URL"] + "/", "ESIM_ORDERING_URL": "notaurl", "ESIM_CATALOGUE_URL": "notaurl"}), balanceArgs...).ok(t)
}

// A top-up that got no answer may have been made: the error says which
// reference makes running it again safe, the generated one included, and
// running it again with that reference tops up once in all.
func TestTopUpWithoutAnAnswerNamesItsReference(t *testing.T) {
	direct, acct := walletEnv(t, "USD")
	upstream, err := url.Parse(direct["ESIM_WALLET_URL"])
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	lost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(httptest.NewRecorder(), r) // carried out...
		<-r.Context().Done()                       // ...but never answered
	}))
	t.Cleanup(lost.Close)
	viaLost := map[string]string{"ESIM_ACCOUNTS_URL": direct["ESIM_ACCOUNTS_URL"], "ESIM_WALLET_URL": lost.URL}

	r := esimctl(t, viaLost, "--timeout", "1s", "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "25", "--reference", "INV-9")
	r.wantError(t, 1, `top up account `+acct.ID+` sandbox with reference "INV-9": no answer from the wallet service`,
		`the top-up may have been made: run it again with --reference "INV-9" (safe: one reference tops up at most once), not without it, which would top up again`)
	esimctl(t, direct, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "25", "--reference", "INV-9").ok(t)
	if got := balanceOf(t, direct, acct.ID, "sandbox"); got != 25_00 {
		t.Errorf("balance after a lost top-up and its retry = %d, want 2500", got)
	}

	// The reference esimctl made is in the error, the one place it is
	// shown when no answer came.
	r = esimctl(t, viaLost, "--timeout", "1s", "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "5", "--json")
	r.wantError(t, 1, "no answer from the wallet service", "the top-up may have been made: run it again with --reference ")
	m := regexp.MustCompile(`--reference "([0-9a-f-]{36})"`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("the error does not name the generated reference: %s", r.stderr)
	}
	var e entry
	esimctl(t, direct, "wallet", "topup", "--account", acct.ID, "--env", "sandbox", "--amount", "5", "--reference", m[1], "--json").ok(t).data(t, &e)
	if e.Reference != m[1] || e.BalanceAfterMinor != 30_00 {
		t.Errorf("retried top-up = %+v, want reference %s and balance after 3000", e, m[1])
	}
	if got := balanceOf(t, direct, acct.ID, "sandbox"); got != 30_00 {
		t.Errorf("balance = %d, want 3000: the retry topped up again", got)
	}
	// A read has no outcome to doubt.
	r = esimctl(t, viaLost, "--timeout", "1s", "wallet", "ledger", "--account", acct.ID, "--env", "sandbox")
	r.wantError(t, 1, "no answer from the wallet service")
	if strings.Contains(r.stderr, "may have") {
		t.Errorf("a read's error speaks of an outcome: %s", r.stderr)
	}
}

// Every new command documents itself, its flags and, for a top-up, what
// makes running it again safe.
func TestWalletAndOrdersHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"wallet", "--help"}, []string{"topup", "balance", "ledger"}},
		{[]string{"wallet", "topup", "--help"}, []string{"--amount", "--reference", "--note", "--env", "safe to\nrun again with the same --reference", "tops up again", "--wallet-url"}},
		{[]string{"wallet", "balance", "--help"}, []string{"--account", "--env"}},
		{[]string{"wallet", "ledger", "--help"}, []string{"--page", "--limit", "1 to 100", strconv.Itoa(wallet.DefaultPageLimit) + " entries"}},
		{[]string{"orders", "--help"}, []string{"list", "get"}},
		{[]string{"orders", "list", "--help"}, []string{"--status", "pending, completed or failed", "--reference", "--page", "--limit", "--ordering-url"}},
		{[]string{"orders", "get", "--help"}, []string{"ORDER_ID", "activation code"}},
		{[]string{"--help"}, []string{"ESIM_WALLET_URL", "ESIM_ORDERING_URL", "--wallet-url", "--ordering-url"}},
	} {
		r := esimctl(t, nil, tc.args...).ok(t)
		for _, want := range append(tc.want, "Usage:", "--json") {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("esimctl %s lacks %q:\n%s", strings.Join(tc.args, " "), want, r.stdout)
			}
		}
	}
}
