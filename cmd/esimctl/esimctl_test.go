package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/esimplatform/esim/cmd/internal/operator"
	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	accountsserver "github.com/esimplatform/esim/services/accounts/server"
)

// cliResult is one in-process run of esimctl.
type cliResult struct {
	code           int
	stdout, stderr string
}

// esimctl runs the CLI in-process against the given environment, exactly
// as main does.
func esimctl(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string {
		if v, ok := env[k]; ok || k != operator.TokenEnv {
			return v
		}
		return internalauthtest.Token(internalauth.Operator)
	}
	code := run(context.Background(), args, getenv, &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// ok fails the test unless the run succeeded.
func (r cliResult) ok(t *testing.T) cliResult {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	return r
}

// data decodes the single JSON object of a --json run into v (the value of
// "data"), failing if stdout holds anything else.
func (r cliResult) data(t *testing.T, v any) map[string]json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var env map[string]json.RawMessage
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, r.stdout)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		t.Fatalf("stdout holds more than one JSON value:\n%s", r.stdout)
	}
	raw, found := env["data"]
	if !found {
		t.Fatalf(`no "data" in %s`, r.stdout)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode data: %v\n%s", err, raw)
	}
	return env
}

// wantError checks exit code and that stderr is one line starting with
// "esimctl: " and containing every fragment.
func (r cliResult) wantError(t *testing.T, code int, fragments ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("a failed command printed on stdout:\n%s", r.stdout)
	}
	first, _, _ := strings.Cut(r.stderr, "\n")
	if !strings.HasPrefix(first, "esimctl: ") {
		t.Errorf("stderr should start with 'esimctl: ', got %q", r.stderr)
	}
	for _, f := range fragments {
		if !strings.Contains(first, f) {
			t.Errorf("error line %q should contain %q", first, f)
		}
	}
}

func newTelemetry(t *testing.T, name string) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), name, telemetry.Config{LogLevel: "error"}, io.Discard)
	if err != nil {
		t.Fatalf("telemetry: %v", err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}

// startAccounts runs the real accounts service on its own fresh database.
func startAccounts(t *testing.T) string {
	t.Helper()
	srv, err := accountsserver.New(context.Background(), accountsserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), Callers: internalauthtest.Callers()}, newTelemetry(t, "accounts"))
	if err != nil {
		t.Fatalf("accounts server: %v", err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// newAccounts creates n accounts with esimctl, on the accounts service
// env names (one it starts, when env names none), and returns their ids:
// every command that takes an account reads it from there first.
func newAccounts(t *testing.T, env map[string]string, n int) []string {
	t.Helper()
	if env["ESIM_ACCOUNTS_URL"] == "" {
		env["ESIM_ACCOUNTS_URL"] = startAccounts(t)
	}
	out := make([]string, n)
	for i := range out {
		var a account
		esimctl(t, env, "accounts", "create", "--name", fmt.Sprintf("Partner %d", i+1), "--json").ok(t).data(t, &a)
		out[i] = a.ID
	}
	return out
}

type account struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Currency           string `json:"currency"`
	RateLimitPerMinute int32  `json:"rate_limit_per_minute"`
	LiveEnabled        bool   `json:"live_enabled"`
}

type key struct {
	ID          string  `json:"id"`
	AccountID   string  `json:"account_id"`
	Environment string  `json:"environment"`
	Prefix      string  `json:"prefix"`
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	RevokedAt   *string `json:"revoked_at"`
	Secret      string  `json:"secret"`
}

func TestAccountAndKeyLifecycle(t *testing.T) {
	env := map[string]string{"ESIM_ACCOUNTS_URL": startAccounts(t)}

	var acct account
	esimctl(t, env, "accounts", "create", "--name", "Acme Travel", "--currency", "eur", "--json").ok(t).data(t, &acct)
	if acct.ID == "" || acct.Name != "Acme Travel" || acct.Currency != "EUR" || acct.RateLimitPerMinute != 0 {
		t.Fatalf("created account = %+v", acct)
	}

	human := esimctl(t, env, "accounts", "get", acct.ID).ok(t).stdout
	if !strings.HasPrefix(human, "id:") {
		t.Errorf("accounts get should start with the id line:\n%s", human)
	}
	for _, want := range []string{acct.ID, "Acme Travel", "EUR", "default"} {
		if !strings.Contains(human, want) {
			t.Errorf("accounts get output lacks %q:\n%s", want, human)
		}
	}

	var listed []account
	envelope := esimctl(t, env, "accounts", "list", "--json").ok(t).data(t, &listed)
	if len(listed) != 1 || listed[0].ID != acct.ID {
		t.Errorf("accounts list = %+v, want just %s", listed, acct.ID)
	}
	if _, ok := envelope["pagination"]; !ok {
		t.Errorf("accounts list --json has no pagination: %s", envelope)
	}
	if table := esimctl(t, env, "accounts", "list").ok(t).stdout; !strings.HasPrefix(table, "ID ") || !strings.Contains(table, acct.ID) {
		t.Errorf("accounts list table:\n%s", table)
	}

	var limited account
	esimctl(t, env, "accounts", "set-rate-limit", "--account", acct.ID, "--per-minute", "6000", "--json").ok(t).data(t, &limited)
	if limited.RateLimitPerMinute != 6000 {
		t.Errorf("rate limit = %d, want 6000", limited.RateLimitPerMinute)
	}

	// Create: the secret is printed once, with a warning on stderr.
	created := esimctl(t, env, "keys", "create", "--account", acct.ID, "--env", "sandbox", "--name", "ci", "--json").ok(t)
	var k key
	created.data(t, &k)
	if !strings.HasPrefix(k.Secret, "sk_sandbox_") || k.Environment != "sandbox" || k.Name != "ci" || k.Status != "active" {
		t.Fatalf("created key = %+v", k)
	}
	if !strings.HasPrefix(k.Secret, k.Prefix) || len(k.Prefix) >= len(k.Secret) {
		t.Errorf("prefix %q should be a strict prefix of the secret", k.Prefix)
	}
	if !strings.Contains(created.stderr, "shown only once") {
		t.Errorf("keys create should warn to store the secret; stderr: %q", created.stderr)
	}
	humanCreate := esimctl(t, env, "keys", "create", "--account", acct.ID, "--env", "live").ok(t).stdout
	if !strings.Contains(humanCreate, "secret: sk_live_") {
		t.Errorf("keys create text output should show the live secret:\n%s", humanCreate)
	}

	// List: prefixes, never secrets.
	listOut := esimctl(t, env, "keys", "list", "--account", acct.ID, "--json").ok(t)
	var keys []key
	listOut.data(t, &keys)
	if len(keys) != 2 {
		t.Fatalf("keys list = %+v, want 2 keys", keys)
	}
	for _, got := range keys {
		if got.Secret != "" {
			t.Errorf("keys list leaks a secret field: %+v", got)
		}
	}
	textList := esimctl(t, env, "keys", "list", "--account", acct.ID).ok(t).stdout
	for _, out := range []string{listOut.stdout, textList} {
		if strings.Contains(out, k.Secret) {
			t.Errorf("keys list printed the secret:\n%s", out)
		}
		if !strings.Contains(out, k.Prefix) {
			t.Errorf("keys list lacks the prefix %q:\n%s", k.Prefix, out)
		}
	}

	// Revoke.
	var revoked key
	esimctl(t, env, "keys", "revoke", "--account", acct.ID, "--key", k.ID, "--json").ok(t).data(t, &revoked)
	if revoked.ID != k.ID || revoked.Status != "revoked" || revoked.RevokedAt == nil {
		t.Errorf("revoked key = %+v", revoked)
	}
	esimctl(t, env, "keys", "list", "--account", acct.ID, "--json").ok(t).data(t, &keys)
	for _, got := range keys {
		if got.ID == k.ID && got.Status != "revoked" {
			t.Errorf("after revoke, keys list shows %+v", got)
		}
	}
}

func TestErrors(t *testing.T) {
	accountsURL := startAccounts(t)
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	const unknownID = "0193e000-0000-7000-8000-000000000000"

	t.Run("unknown account", func(t *testing.T) {
		esimctl(t, env, "accounts", "get", unknownID).wantError(t, 1, "esimctl: account "+unknownID+" not found")
		esimctl(t, env, "keys", "list", "--account", unknownID, "--json").wantError(t, 1, "esimctl: account "+unknownID+" not found")
		esimctl(t, env, "keys", "create", "--account", unknownID, "--env", "sandbox").wantError(t, 1, "esimctl: account "+unknownID+" not found")
	})
	t.Run("unknown key", func(t *testing.T) {
		var acct account
		esimctl(t, env, "accounts", "create", "--name", "Keyless", "--json").ok(t).data(t, &acct)
		esimctl(t, env, "keys", "revoke", "--account", acct.ID, "--key", unknownID).wantError(t, 1, "revoke key "+unknownID)
	})
	t.Run("bad currency", func(t *testing.T) {
		esimctl(t, env, "accounts", "create", "--name", "X", "--currency", "XYZ").wantError(t, 2, `invalid --currency "XYZ"`, "USD, EUR or GBP")
	})
	t.Run("bad environment", func(t *testing.T) {
		esimctl(t, env, "keys", "create", "--account", unknownID, "--env", "staging").wantError(t, 2, `invalid --env "staging"`)
	})
	t.Run("unreachable by flag", func(t *testing.T) {
		esimctl(t, env, "--accounts-url", "http://127.0.0.1:1", "accounts", "list").
			wantError(t, 1, "list accounts: ", "http://127.0.0.1:1", "connection refused", "make run")
	})
	t.Run("unreachable by environment", func(t *testing.T) {
		esimctl(t, map[string]string{"ESIM_CATALOGUE_URL": "http://127.0.0.1:1"}, "plans", "list", "--json").
			wantError(t, 1, "list plans: ", "catalogue service at http://127.0.0.1:1", "ESIM_CATALOGUE_URL")
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"accounts", "create"},                    // missing --name
			{"accounts", "get"},                       // missing id
			{"accounts", "get", "a", "b"},             // too many
			{"accounts", "frobnicate"},                // unknown subcommand
			{"frobnicate"},                            // unknown command
			{"accounts", "list", "--no-such-flag"},    // unknown flag
			{"accounts", "list", "--limit", "101"},    // out of range
			{"accounts", "list", "--limit", "twenty"}, // not a number
			{"plans", "list", "--type", "monthly"},
			{"plans", "list", "--country", "Japan"},
			{"plans", "list", "--country", ""}, // an unset "$CC": not every plan
			{"plans", "list", "--type", ""},
			{"accounts", "set-rate-limit", "--account", unknownID, "--per-minute", "-1"},
			{"--timeout", "0s", "accounts", "list"},
			{"plans", "retire"}, // missing id
			{"accounts", "list", "x"},
			{"keys", "list", "--account", "not-a-uuid"},
		} {
			r := esimctl(t, env, args...)
			if r.code != 2 || !strings.HasPrefix(r.stderr, "esimctl: ") || strings.HasPrefix(r.stderr, "esimctl: esimctl") || r.stdout != "" {
				t.Errorf("esimctl %s: exit %d, stdout %q, stderr %q; want exit 2 and an esimctl: line", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			}
		}
	})
}

// Every command documents itself and --help succeeds.
func TestHelpOnEveryCommand(t *testing.T) {
	c := &cli{stdout: io.Discard, stderr: io.Discard}
	var walk func(cmd *cobra.Command, path []string)
	walk = func(cmd *cobra.Command, path []string) {
		args := append(append([]string{}, path...), "--help")
		r := esimctl(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, "--json") {
			t.Errorf("esimctl %s: exit %d, stdout:\n%s", strings.Join(args, " "), r.code, r.stdout)
		}
		for _, sub := range cmd.Commands() {
			if sub.Name() == "help" {
				continue
			}
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(c.rootCommand(func(string) string { return "" }), nil)
}

func TestMoneyAndSizes(t *testing.T) {
	if got := priceText(1250, "USD"); got != "12.50 USD" {
		t.Errorf("priceText = %q", got)
	}
	for n, want := range map[int64]string{1 << 30: "1 GB", 3 << 30: "3 GB", 3 << 29: "1.5 GB", 500 << 20: "500 MB", 42: "42 B"} {
		if got := dataSize(n); got != want {
			t.Errorf("dataSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// Every command that calls a service is in a group that names it: a
// command outside one would fail every run with checkServiceURL's
// "no service named for its group".
func TestEveryCommandNamesItsService(t *testing.T) {
	c := &cli{stdout: io.Discard, stderr: io.Discard, accountsURL: defaultAccountsURL, catalogueURL: defaultCatalogueURL,
		walletURL: defaultWalletURL, orderingURL: defaultOrderingURL}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if !cmd.HasSubCommands() && cmd.HasParent() && cmd.Annotations[localAnnotation] == "" {
			if err := c.checkServiceURL(cmd); err != nil {
				t.Errorf("%s: %v", cmd.CommandPath(), err)
			}
		}
		for _, sub := range cmd.Commands() {
			if sub.Name() != "help" {
				walk(sub)
			}
		}
	}
	walk(c.rootCommand(func(string) string { return "" }))
	if err := c.checkServiceURL(&cobra.Command{Use: "stray"}); err == nil {
		t.Error("a command in no group passed the check")
	}
	misnamed := &cobra.Command{Use: "misnamed"}
	group("typo", "", "accounts,walet", misnamed)
	if err := c.checkServiceURL(misnamed); err == nil || !strings.Contains(err.Error(), `unknown service "walet"`) {
		t.Errorf("a group naming an unknown service passed the check: %v", err)
	}
}
