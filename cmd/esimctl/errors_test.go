package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/esimplatform/esim/services/accounts"
)

// A group given without a subcommand is a usage error naming the
// subcommands, with or without --json: printing the help and exiting 0
// would let a script that forgot the subcommand "succeed" with no JSON.
func TestBareGroupIsUsageError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "esimctl: missing command: accounts, completion, esims, events, keys, orders, plans, provider, users, version, wallet or webhooks"},
		{[]string{"provider"}, "esimctl: provider: missing subcommand: check"},
		{[]string{"accounts"}, "esimctl: accounts: missing subcommand: create, enable-live, get, list, requests or set-rate-limit"},
		{[]string{"users"}, "esimctl: users: missing subcommand: invite, list, remove or reset-link"},
		{[]string{"keys"}, "esimctl: keys: missing subcommand: create, list or revoke"},
		{[]string{"plans"}, "esimctl: plans: missing subcommand: get, import, list or retire"},
		{[]string{"wallet"}, "esimctl: wallet: missing subcommand: balance, ledger or topup"},
		{[]string{"orders"}, "esimctl: orders: missing subcommand: get or list"},
		{[]string{"esims"}, "esimctl: esims: missing subcommand: get, list or simulate"},
	} {
		for _, args := range [][]string{tc.args, append(append([]string{}, tc.args...), "--json"), append([]string{"--json"}, tc.args...)} {
			r := esimctl(t, nil, args...)
			name := "esimctl " + strings.Join(args, " ")
			if r.code != 2 {
				t.Errorf("%s: exit %d, want 2; stderr %q", name, r.code, r.stderr)
			}
			// Errors never go to stdout, --json or not: a script reads
			// stdout as the JSON answer and the exit status as success.
			if r.stdout != "" {
				t.Errorf("%s: printed on stdout:\n%s", name, r.stdout)
			}
			if first, _, _ := strings.Cut(r.stderr, "\n"); first != tc.want {
				t.Errorf("%s: error line %q, want %q", name, first, tc.want)
			}
		}
	}
	// Asking for help is not an error.
	for _, args := range [][]string{{"--help"}, {"keys", "--help"}, {"keys", "--json", "--help"}, {"help", "keys"}, {"help", "orders", "list"}, {"help"}, {"plans", "-h"}} {
		r := esimctl(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || r.stderr != "" {
			t.Errorf("esimctl %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), r.code, r.stderr, r.stdout)
		}
	}
}

// The services word their errors with what was being done ("create key for
// account A: not found"); esimctl says what it was doing too, and the two
// must not stack into "create key for account A: create key for account A:
// not found".
func TestCallErrorsSayTheirContextOnce(t *testing.T) {
	env := map[string]string{"ESIM_ACCOUNTS_URL": startAccounts(t), "ESIM_CATALOGUE_URL": startCatalogue(t)}
	const unknownID = "0193e000-0000-7000-8000-000000000000"
	// The services print ids in lower case; esimctl lower-cases them up
	// front, so its context and theirs are spelt alike.
	upperID := strings.ToUpper(unknownID)

	var acct account
	esimctl(t, env, "accounts", "create", "--name", "Context", "--json").ok(t).data(t, &acct)

	for _, tc := range []struct {
		args    []string
		context string
		code    int
	}{
		// An argument the service refuses is a usage error, as one esimctl
		// refuses itself.
		{[]string{"accounts", "create", "--name", strings.Repeat("n", 1000)}, "create account", 2},
		// An unknown account is "account X not found" everywhere
		// (TestUnknownAccount); what else the accounts service refuses
		// keeps its context.
		{[]string{"users", "invite", "--account", acct.ID, "--email", "not an email", "--json"}, "invite to account " + acct.ID, 2},
		{[]string{"keys", "create", "--account", strings.ToUpper(acct.ID), "--env", "sandbox", "--name", strings.Repeat("k", 1000)}, "create key for account " + acct.ID, 2},
		{[]string{"keys", "revoke", "--account", acct.ID, "--key", unknownID}, "revoke key " + unknownID + " of account " + acct.ID, 1},
		{[]string{"keys", "revoke", "--account", strings.ToUpper(acct.ID), "--key", upperID, "--json"}, "revoke key " + unknownID + " of account " + acct.ID, 1},
		{[]string{"plans", "get", unknownID}, "get plan " + unknownID, 1},
		{[]string{"plans", "retire", unknownID}, "retire plan " + unknownID, 1},
		{[]string{"plans", "retire", upperID, "--json"}, "retire plan " + unknownID, 1},
	} {
		r := esimctl(t, env, tc.args...)
		r.wantError(t, tc.code, "esimctl: "+tc.context+": ")
		first, _, _ := strings.Cut(r.stderr, "\n")
		// Compared case-insensitively: a service echoing the id in its own
		// spelling is still the same context said twice.
		verb, _, _ := strings.Cut(tc.context, " ")
		if n := strings.Count(strings.ToLower(first), strings.ToLower(verb)+" "); n != 1 {
			t.Errorf("esimctl %s: %q says %q %d times, want once", strings.Join(tc.args, " "), first, verb, n)
		}
	}
}

// counted puts a request counter in front of a service, to tell whether
// esimctl called it at all.
func counted(t *testing.T, serviceURL string) (string, *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(serviceURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, &calls
}

// A malformed account, key or plan id is a usage error (exit 2) found
// before any service is called, not an unknown id (exit 1): a typo in a
// script must not read as "that account is gone". Only the canonical
// 36-character form is an id: the other spellings uuid.Parse takes
// (braces, urn:uuid:, no hyphens) are rejected too, even when they spell a
// real id, so nothing is created, changed or revoked through them.
func TestMalformedIDIsUsageError(t *testing.T) {
	accountsURL, catalogueURL := startAccounts(t), startCatalogue(t)
	direct := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, "ESIM_CATALOGUE_URL": catalogueURL}

	var acct account
	esimctl(t, direct, "accounts", "create", "--name", "Typo", "--json").ok(t).data(t, &acct)
	var k key
	esimctl(t, direct, "keys", "create", "--account", acct.ID, "--env", "sandbox", "--json").ok(t).data(t, &k)
	var plans []plan
	esimctl(t, direct, "plans", "list", "--limit", "1", "--json").ok(t).data(t, &plans)
	if len(plans) != 1 {
		t.Fatalf("plans list = %+v, want one plan", plans)
	}
	planID := plans[0].ID

	countedAccounts, accountsCalls := counted(t, accountsURL)
	countedCatalogue, catalogueCalls := counted(t, catalogueURL)
	env := map[string]string{"ESIM_ACCOUNTS_URL": countedAccounts, "ESIM_CATALOGUE_URL": countedCatalogue}

	// Every spelling of a real id but the canonical one, and plain junk.
	malformed := func(id string) []string {
		return []string{
			"not-a-uuid",
			"",
			"{" + id + "}",
			"urn:uuid:" + id,
			strings.ReplaceAll(id, "-", ""),
			" " + id,
			id + "0",
			strings.Replace(id, "-", "_", 1),
		}
	}
	type idCase struct {
		args func(bad string) []string
		real string // the id the malformed spellings are made from
		name string // the flag or argument, as the message names it
	}
	for _, tc := range []idCase{
		{func(bad string) []string { return []string{"accounts", "get", bad} }, acct.ID, "ACCOUNT_ID"},
		{func(bad string) []string {
			return []string{"accounts", "set-rate-limit", "--account", bad, "--per-minute", "6000"}
		}, acct.ID, "--account"},
		{func(bad string) []string { return []string{"accounts", "enable-live", bad} }, acct.ID, "ACCOUNT_ID"},
		{func(bad string) []string {
			return []string{"users", "invite", "--account", bad, "--email", "a@example.com"}
		}, acct.ID, "--account"},
		{func(bad string) []string { return []string{"users", "list", "--account", bad} }, acct.ID, "--account"},
		{func(bad string) []string {
			return []string{"users", "remove", "--account", bad, "--user", acct.ID}
		}, acct.ID, "--account"},
		{func(bad string) []string {
			return []string{"users", "remove", "--account", acct.ID, "--user", bad}
		}, acct.ID, "--user"},
		{func(bad string) []string { return []string{"keys", "create", "--account", bad, "--env", "live"} }, acct.ID, "--account"},
		{func(bad string) []string { return []string{"keys", "list", "--account", bad} }, acct.ID, "--account"},
		{func(bad string) []string { return []string{"keys", "revoke", "--account", bad, "--key", k.ID} }, acct.ID, "--account"},
		{func(bad string) []string { return []string{"keys", "revoke", "--account", acct.ID, "--key", bad} }, k.ID, "--key"},
		{func(bad string) []string { return []string{"plans", "get", bad} }, planID, "PLAN_ID"},
		{func(bad string) []string { return []string{"plans", "retire", bad} }, planID, "PLAN_ID"},
	} {
		for _, bad := range malformed(tc.real) {
			for _, asJSON := range []bool{false, true} {
				args := tc.args(bad)
				if asJSON {
					args = append(args, "--json")
				}
				r := esimctl(t, env, args...)
				want := "esimctl: invalid " + tc.name + " " + strconv.Quote(bad) + ": not a UUID"
				r.wantError(t, 2)
				if first, _, _ := strings.Cut(r.stderr, "\n"); first != want {
					t.Errorf("esimctl %q: error line %q, want %q", args, first, want)
				}
			}
		}
	}
	if n, m := accountsCalls.Load(), catalogueCalls.Load(); n != 0 || m != 0 {
		t.Errorf("malformed ids reached the services: %d accounts calls, %d catalogue calls; want none", n, m)
	}

	// Nothing changed through the non-canonical spellings.
	var after account
	esimctl(t, direct, "accounts", "get", acct.ID, "--json").ok(t).data(t, &after)
	if after.RateLimitPerMinute != 0 {
		t.Errorf("rate limit changed to %d through a malformed id", after.RateLimitPerMinute)
	}
	var keys []key
	esimctl(t, direct, "keys", "list", "--account", acct.ID, "--json").ok(t).data(t, &keys)
	if len(keys) != 1 || keys[0].ID != k.ID || keys[0].Status != "active" {
		t.Errorf("keys after malformed ids = %+v, want just %s, active", keys, k.ID)
	}
	var p plan
	esimctl(t, direct, "plans", "get", planID, "--json").ok(t).data(t, &p)
	if p.Status != "active" {
		t.Errorf("plan %s is %s after malformed ids, want active", planID, p.Status)
	}

	// The canonical form is taken in either case and sent in lower case.
	upper := strings.ToUpper
	esimctl(t, env, "keys", "list", "--account", upper(acct.ID), "--json").ok(t).data(t, &keys)
	if len(keys) != 1 || keys[0].ID != k.ID {
		t.Errorf("keys list --account %s = %+v", upper(acct.ID), keys)
	}
	esimctl(t, env, "plans", "get", upper(planID), "--json").ok(t).data(t, &p)
	if p.ID != planID {
		t.Errorf("plans get %s = %+v", upper(planID), p)
	}
	var other account
	esimctl(t, env, "accounts", "create", "--name", "Keyless", "--json").ok(t).data(t, &other)
	if got := esimctl(t, env, "keys", "list", "--account", upper(other.ID)).ok(t).stdout; got != "account "+other.ID+" has no API keys\n" {
		t.Errorf("keys list of a keyless account: %q", got)
	}
}

// A rate limit outside the accounts service's bounds (0 to
// accounts.MaxRateLimitPerMinute) is a usage error (exit 2) naming the flag
// and the maximum, found before any call; the service would refuse it as a
// failed operation (exit 1). The maximum itself is taken, and the help
// text says what it is.
func TestRateLimitOutOfRangeIsUsageError(t *testing.T) {
	accountsURL := startAccounts(t)
	direct := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	var acct account
	esimctl(t, direct, "accounts", "create", "--name", "Limits", "--json").ok(t).data(t, &acct)

	countedAccounts, calls := counted(t, accountsURL)
	env := map[string]string{"ESIM_ACCOUNTS_URL": countedAccounts}
	maxText := strconv.Itoa(accounts.MaxRateLimitPerMinute)
	over := strconv.Itoa(accounts.MaxRateLimitPerMinute + 1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"accounts", "set-rate-limit", "--account", acct.ID, "--per-minute", over},
			"esimctl: invalid --per-minute " + over + ": want 0 (the gateway's default) to " + maxText},
		{[]string{"accounts", "set-rate-limit", "--account", acct.ID, "--per-minute", "2147483647", "--json"},
			"esimctl: invalid --per-minute 2147483647: want 0 (the gateway's default) to " + maxText},
		{[]string{"accounts", "set-rate-limit", "--account", acct.ID, "--per-minute", "-1"},
			"esimctl: invalid --per-minute -1: want 0 (the gateway's default) to " + maxText},
		{[]string{"accounts", "create", "--name", "Too fast", "--rate-limit", over},
			"esimctl: invalid --rate-limit " + over + ": want 0 (the gateway's default) to " + maxText},
		{[]string{"accounts", "create", "--name", "Too fast", "--rate-limit", "-5", "--json"},
			"esimctl: invalid --rate-limit -5: want 0 (the gateway's default) to " + maxText},
	} {
		r := esimctl(t, env, tc.args...)
		r.wantError(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); first != tc.want {
			t.Errorf("esimctl %s: error line %q, want %q", strings.Join(tc.args, " "), first, tc.want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("out-of-range rate limits reached the accounts service: %d calls, want none", n)
	}

	var got account
	esimctl(t, env, "accounts", "set-rate-limit", "--account", acct.ID, "--per-minute", maxText, "--json").ok(t).data(t, &got)
	if got.RateLimitPerMinute != accounts.MaxRateLimitPerMinute {
		t.Errorf("rate limit = %d, want the maximum %s", got.RateLimitPerMinute, maxText)
	}
	esimctl(t, env, "accounts", "create", "--name", "Fastest", "--rate-limit", maxText, "--json").ok(t).data(t, &got)
	if got.RateLimitPerMinute != accounts.MaxRateLimitPerMinute {
		t.Errorf("created with rate limit %d, want the maximum %s", got.RateLimitPerMinute, maxText)
	}

	for _, args := range [][]string{{"accounts", "set-rate-limit", "--help"}, {"accounts", "create", "--help"}} {
		if r := esimctl(t, nil, args...).ok(t); !strings.Contains(r.stdout, "at most "+maxText) {
			t.Errorf("esimctl %s does not give the maximum %s:\n%s", strings.Join(args, " "), maxText, r.stdout)
		}
	}
}

// Usage errors are said once, after a single "esimctl: ", with the
// command path without its root, and argument counts in good English.
func TestUsageErrorWording(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plans", "retire"}, "esimctl: plans retire: missing --plan ID (or the id alone, as PLAN_ID)"},
		{[]string{"plans", "retire", "--json"}, "esimctl: plans retire: missing --plan ID (or the id alone, as PLAN_ID)"},
		{[]string{"plans", "get", "a", "b"}, "esimctl: plans get takes at most 1 argument: PLAN_ID (got 2)"},
		{[]string{"accounts", "get"}, "esimctl: accounts get: missing --account ID (or the id alone, as ACCOUNT_ID)"},
		{[]string{"accounts", "enable-live", "--account", "0193e000-0000-7000-8000-000000000000", "0193e000-0000-7000-8000-000000000001"},
			`esimctl: accounts enable-live: --account "0193e000-0000-7000-8000-000000000000" and ACCOUNT_ID "0193e000-0000-7000-8000-000000000001" disagree: give the id once`},
		{[]string{"completion"}, "esimctl: completion: missing shell: bash, zsh or fish"},
		{[]string{"completion", "bash", "zsh"}, "esimctl: completion takes 1 argument: the shell (got 2)"},
		{[]string{"version", "now"}, `esimctl: version takes no arguments, got ["now"]`},
		{[]string{"accounts", "list", "x"}, `esimctl: accounts list takes no arguments, got ["x"]`},
		{[]string{"keys", "list", "--account", "x", "y"}, `esimctl: keys list takes no arguments, got ["y"]`},
	} {
		r := esimctl(t, nil, tc.args...)
		r.wantError(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); first != tc.want {
			t.Errorf("esimctl %s: error line %q, want %q", strings.Join(tc.args, " "), first, tc.want)
		}
	}
}

// A service URL is checked before any call. A trailing slash, as an
// operator pastes it, works; one without a scheme is a usage error saying
// what is wanted; a password in it is never echoed; and a URL that points
// at something other than the service says so and which setting to fix,
// rather than relaying a bare 404 or "no handler for path".
func TestServiceURLs(t *testing.T) {
	accountsURL := startAccounts(t)

	var accts []account
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": accountsURL + "/"}, "accounts", "list", "--json").ok(t).data(t, &accts)
	esimctl(t, nil, "--accounts-url", accountsURL+"/", "accounts", "list", "--json").ok(t).data(t, &accts)

	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--accounts-url", "127.0.0.1:8081", "accounts", "list"},
			`esimctl: invalid --accounts-url: "127.0.0.1:8081" is not an http:// or https:// base URL with a host and no query, such as http://127.0.0.1:8081 (set by --accounts-url or ESIM_ACCOUNTS_URL)`},
		{map[string]string{"ESIM_CATALOGUE_URL": "localhost:8082"}, []string{"plans", "list", "--json"},
			`esimctl: invalid --catalogue-url: "localhost:8082" is not an http:// or https:// base URL with a host and no query, such as http://127.0.0.1:8082 (set by --catalogue-url or ESIM_CATALOGUE_URL)`},
		{nil, []string{"--accounts-url", "ftp://127.0.0.1:8081", "accounts", "list"},
			`esimctl: invalid --accounts-url: "ftp://127.0.0.1:8081" is not an http:// or https:// base URL with a host and no query, such as http://127.0.0.1:8081 (set by --accounts-url or ESIM_ACCOUNTS_URL)`},
		{nil, []string{"--accounts-url", "op:s3cret@127.0.0.1:8081", "accounts", "list"},
			`esimctl: invalid --accounts-url: (not shown: it may hold a password) is not an http:// or https:// base URL with a host and no query, such as http://127.0.0.1:8081 (set by --accounts-url or ESIM_ACCOUNTS_URL)`},
		{nil, []string{"--accounts-url", "http://op:s3cret@[::1", "accounts", "list"},
			`esimctl: invalid --accounts-url: (not shown: it may hold a password) is not an http:// or https:// base URL with a host and no query, such as http://127.0.0.1:8081 (set by --accounts-url or ESIM_ACCOUNTS_URL)`},
	} {
		r := esimctl(t, tc.env, tc.args...)
		r.wantError(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); first != tc.want {
			t.Errorf("esimctl %s: error line %q, want %q", strings.Join(tc.args, " "), first, tc.want)
		}
	}

	// A command checks only the address of the service it calls: a
	// wrong catalogue URL does not stop an accounts command, nor the
	// reverse.
	var acct account
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, "ESIM_CATALOGUE_URL": "notaurl"}, "accounts", "create", "--name", "Elsewhere", "--json").ok(t).data(t, &acct)
	var keys []key
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}, "--catalogue-url", "notaurl", "keys", "list", "--account", acct.ID, "--json").ok(t).data(t, &keys)
	var plans []plan
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": "notaurl", "ESIM_CATALOGUE_URL": startCatalogue(t)}, "plans", "list", "--json").ok(t).data(t, &plans)

	r := esimctl(t, nil, "--accounts-url", "http://op:s3cret@127.0.0.1:1", "accounts", "list")
	r.wantError(t, 1, "http://op:xxxxx@127.0.0.1:1", "connection refused")
	if strings.Contains(r.stderr, "s3cret") {
		t.Errorf("the password in --accounts-url is in the error: %q", r.stderr)
	}

	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	esimctl(t, nil, "--accounts-url", notFound.URL, "accounts", "list").
		wantError(t, 1, "esimctl: list accounts: "+notFound.URL+" does not answer as the accounts service (", "check --accounts-url / ESIM_ACCOUNTS_URL")
	esimctl(t, map[string]string{"ESIM_CATALOGUE_URL": accountsURL}, "plans", "list", "--json").
		wantError(t, 1, "esimctl: list plans: "+accountsURL+" does not answer as the catalogue service (", "check --catalogue-url / ESIM_CATALOGUE_URL")
}

// A change that got no answer may still have been carried out: the error
// says so, and whether running the command again is safe.
func TestAChangeWithoutAnAnswerSaysItMayHaveHappened(t *testing.T) {
	accountsURL := startAccounts(t)
	upstream, err := url.Parse(accountsURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	lost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(httptest.NewRecorder(), r) // carried out...
		<-r.Context().Done()                       // ...but never answered
	}))
	defer lost.Close()
	direct := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	viaLost := map[string]string{"ESIM_ACCOUNTS_URL": lost.URL}

	esimctl(t, viaLost, "--timeout", "300ms", "accounts", "create", "--name", "Lost Answer Travel").
		wantError(t, 1, "no answer from the accounts service", "the account may have been created", "esimctl accounts list")
	var list struct {
		Accounts []struct{ ID, Name string }
	}
	esimctl(t, direct, "--json", "accounts", "list").ok(t).data(t, &list.Accounts)
	var id string
	for _, a := range list.Accounts {
		if a.Name == "Lost Answer Travel" {
			id = a.ID
		}
	}
	if id == "" {
		t.Fatal("the account was not created, so the test shows nothing")
	}
	esimctl(t, viaLost, "--timeout", "300ms", "keys", "create", "--account", id, "--env", "sandbox").
		wantError(t, 1, "a key may have been created", "revoke one whose secret you did not get")
	esimctl(t, viaLost, "--timeout", "300ms", "accounts", "set-rate-limit", "--account", id, "--per-minute", "60").
		wantError(t, 1, "it may have taken effect: running it again is safe")
	// A read has no outcome to doubt.
	r := esimctl(t, viaLost, "--timeout", "300ms", "accounts", "get", id)
	r.wantError(t, 1, "no answer")
	if strings.Contains(r.stderr, "may have") {
		t.Errorf("a read's error speaks of an outcome: %s", r.stderr)
	}
}

// Whichever side finds a flag's value wrong, esimctl or the service, the
// answer is a usage error (exit 2) with the pointer to --help, and nothing
// is created. Text that is not UTF-8 is refused before any call: a
// protobuf string cannot carry it.
func TestRefusedArgumentIsUsageError(t *testing.T) {
	accountsURL, accountCalls := counted(t, startAccounts(t))
	catalogueURL, _ := counted(t, startCatalogue(t))
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL, "ESIM_CATALOGUE_URL": catalogueURL}
	var before []account
	esimctl(t, env, "accounts", "list", "--json").ok(t).data(t, &before)

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"accounts", "create", "--name", strings.Repeat("a", 300)}, []string{"esimctl: create account: ", "120"}},
		{[]string{"accounts", "create", "--name", "Evil\nName"}, []string{"esimctl: create account: "}},
		{[]string{"plans", "list", "--country", "ZZ"}, []string{"esimctl: list plans: country: want an ISO 3166-1 alpha-2 country code, such as JP"}},
	} {
		r := esimctl(t, env, tc.args...)
		r.wantError(t, 2, tc.want...)
		if !strings.Contains(r.stderr, "Run 'esimctl "+tc.args[0]+" "+tc.args[1]+" --help' for usage.") {
			t.Errorf("esimctl %q: no pointer to --help:\n%s", tc.args, r.stderr)
		}
	}

	calls := accountCalls.Load()
	esimctl(t, env, "accounts", "create", "--name", "Bad\xffUTF").wantError(t, 2, "esimctl: invalid --name: not UTF-8 text")
	esimctl(t, env, "accounts", "get", "\xff").wantError(t, 2, "not UTF-8 text")
	if n := accountCalls.Load() - calls; n != 0 {
		t.Errorf("text that is not UTF-8 reached the accounts service (%d calls)", n)
	}

	var after []account
	esimctl(t, env, "accounts", "list", "--json").ok(t).data(t, &after)
	if len(after) != len(before) {
		t.Errorf("%d accounts before the refused commands, %d after", len(before), len(after))
	}
}

// A call that fails in the transport, with no answer from any server, says
// which service and setting, not net/http's bare wording.
func TestTransportFailureNamesTheService(t *testing.T) {
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	tlsToPlain := strings.Replace(plain.URL, "http://", "https://", 1)
	esimctl(t, nil, "--accounts-url", tlsToPlain, "accounts", "list").
		wantError(t, 1, "esimctl: list accounts: cannot talk to the accounts service at "+tlsToPlain+" (", "HTTPS", "nothing was sent", "check --accounts-url / ESIM_ACCOUNTS_URL")
	// A handshake that failed sent nothing: no advice to look for what a
	// create may have done.
	r := esimctl(t, nil, "--accounts-url", tlsToPlain, "accounts", "create", "--name", "Lost")
	r.wantError(t, 1, "cannot talk to the accounts service")
	if strings.Contains(r.stderr, "may have been created") {
		t.Errorf("a create that was never sent reads as one that may have happened: %q", r.stderr)
	}
}

// A mistyped command, subcommand, flag or shell is a usage error (exit 2)
// that names what was probably meant: within two edits of it, or begun by
// it; a word close to nothing gets no guess.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"acounts"}, `esimctl: unknown command "acounts" for "esimctl"; did you mean "accounts"?`},
		{[]string{"webhook", "show"}, `esimctl: unknown command "webhook" for "esimctl"; did you mean "webhooks"?`},
		{[]string{"acc"}, `esimctl: unknown command "acc" for "esimctl"; did you mean "accounts"?`},
		{[]string{"Orders", "--json"}, `esimctl: unknown command "Orders" for "esimctl"; did you mean "orders"?`},
		{[]string{"verison"}, `esimctl: unknown command "verison" for "esimctl"; did you mean "version"?`},
		{[]string{"frobnicate"}, `esimctl: unknown command "frobnicate" for "esimctl"`},
		{[]string{"accounts", "lst"}, `esimctl: unknown command "lst" for "esimctl accounts"; did you mean "list"?`},
		{[]string{"plans", "retrie", "x"}, `esimctl: unknown command "retrie" for "esimctl plans"; did you mean "retire"?`},
		{[]string{"keys", "revok"}, `esimctl: unknown command "revok" for "esimctl keys"; did you mean "revoke"?`},
		{[]string{"wallet", "top-up"}, `esimctl: unknown command "top-up" for "esimctl wallet"; did you mean "topup"?`},
		{[]string{"esims", "gte"}, `esimctl: unknown command "gte" for "esimctl esims"; did you mean "get"?`},
		{[]string{"webhooks", "rotate"}, `esimctl: unknown command "rotate" for "esimctl webhooks"; did you mean "rotate-secret"?`},
		{[]string{"orders", "list", "--acount", "x"}, `esimctl: unknown flag: --acount; did you mean "--account"?`},
		{[]string{"orders", "list", "--acount=x"}, `esimctl: unknown flag: --acount; did you mean "--account"?`},
		{[]string{"keys", "list", "--jsn"}, `esimctl: unknown flag: --jsn; did you mean "--json"?`},
		{[]string{"accounts", "list", "--frobnicate"}, `esimctl: unknown flag: --frobnicate`},
		{[]string{"completion", "zhs"}, `esimctl: invalid shell "zhs": want bash, zsh or fish; did you mean "zsh"?`},
		{[]string{"completion", "powershell"}, `esimctl: invalid shell "powershell": want bash, zsh or fish`},
		{[]string{"help", "acounts"}, `esimctl: unknown command "acounts" for "esimctl"; did you mean "accounts"?`},
		{[]string{"help", "orders", "lsit"}, `esimctl: unknown command "lsit" for "esimctl orders"; did you mean "list"?`},
	} {
		r := esimctl(t, nil, tc.args...)
		name := "esimctl " + strings.Join(tc.args, " ")
		if r.code != 2 || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want exit 2 and nothing on stdout", name, r.code, r.stdout)
		}
		first, rest, _ := strings.Cut(r.stderr, "\n")
		if first != tc.want {
			t.Errorf("%s: error line %q, want %q", name, first, tc.want)
		}
		if !strings.HasPrefix(rest, "Run 'esimctl") || !strings.HasSuffix(rest, " --help' for usage.\n") {
			t.Errorf("%s: no pointer to --help after the error:\n%s", name, r.stderr)
		}
	}
	for words, want := range map[[2]string]int{{"", ""}: 0, {"list", "list"}: 0, {"lst", "list"}: 1, {"retrie", "retire"}: 2, {"kitten", "sitting"}: 3, {"é", "e"}: 1} {
		if got := editDistance(words[0], words[1]); got != want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", words[0], words[1], got, want)
		}
	}
}

// A name is never blank where one is created: "" or spaces alone are a
// usage error (exit 2) before any call, as `--name "$N"` with N unset
// gives them, rather than a nameless account or key.
func TestBlankNamesAreRefused(t *testing.T) {
	accountsURL, catalogueURL := startAccounts(t), startCatalogue(t)
	direct := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	acct := newAccounts(t, direct, 1)[0]
	countedAccounts, accountsCalls := counted(t, accountsURL)
	countedCatalogue, catalogueCalls := counted(t, catalogueURL)
	env := map[string]string{"ESIM_ACCOUNTS_URL": countedAccounts, "ESIM_CATALOGUE_URL": countedCatalogue, "ESIM_WALLET_URL": "http://127.0.0.1:1"}
	blankPlan := strings.Replace(newPlanJSON, `"Japan 50 GB, 30 days"`, `" \t "`, 1)
	for _, blank := range []string{"", "  ", "\t"} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"accounts", "create", "--name", blank}, `esimctl: invalid --name ` + strconv.Quote(blank) + `: blank; give the partner's name, as it should appear in the portal`},
			{[]string{"accounts", "create", "--name", blank, "--currency", "EUR", "--json"}, `esimctl: invalid --name ` + strconv.Quote(blank) + `: blank;`},
			{[]string{"keys", "create", "--account", acct, "--env", "sandbox", "--name", blank}, `esimctl: invalid --name ` + strconv.Quote(blank) + `: blank; leave --name out for a key without a label`},
			{[]string{"users", "invite", "--account", acct, "--email", blank}, `esimctl: invalid --email ` + strconv.Quote(blank) + `: blank; give the person's email address`},
			{[]string{"users", "reset-link", "--email", blank}, `esimctl: invalid --email ` + strconv.Quote(blank) + `: blank; give the person's email address`},
			{[]string{"wallet", "topup", "--account", acct, "--env", "sandbox", "--amount", "1", "--reference", blank}, `esimctl: invalid --reference ` + strconv.Quote(blank) + `: `},
		} {
			r := esimctl(t, env, tc.args...)
			r.wantError(t, 2)
			if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.HasPrefix(first, tc.want) {
				t.Errorf("esimctl %q: error line %q, want %q", tc.args, first, tc.want)
			}
		}
	}
	esimctl(t, env, "plans", "import", writeFile(t, "blank.json", blankPlan)).
		wantError(t, 2, `esimctl: import plans from `, `: plans[0].name " \t ": blank: every plan needs a name`)
	if n, m := accountsCalls.Load(), catalogueCalls.Load(); n != 0 || m != 0 {
		t.Errorf("blank names reached the services: %d accounts and %d catalogue calls, want none", n, m)
	}
	// A key without --name has no label, as before.
	var k key
	esimctl(t, direct, "keys", "create", "--account", acct, "--env", "sandbox", "--json").ok(t).data(t, &k)
	if k.Name != "" {
		t.Errorf("a key made without --name is named %q", k.Name)
	}
}
