package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command that takes an account says "account X not found" (exit 1)
// for one the accounts service does not know, and calls no other service:
// orders list and events list used to answer with an empty list (exit 0),
// since ordering and the webhook service keep no accounts, and webhooks set
// stored a URL for it. A test walks the command tree, so a new command
// that takes an account fails here until it is listed.
func TestUnknownAccount(t *testing.T) {
	accountsURL := startAccounts(t)
	_, orderingURL, _ := startOrdering(t)
	webhookURL := startWebhook(t)
	walletURL := startWallet(t)
	ordering, orderingCalls := counted(t, orderingURL)
	webhook, webhookCalls := counted(t, webhookURL)
	wallet, walletCalls := counted(t, walletURL)
	env := map[string]string{
		"ESIM_ACCOUNTS_URL": accountsURL, "ESIM_ORDERING_URL": ordering,
		"ESIM_WEBHOOK_URL": webhook, "ESIM_WALLET_URL": wallet,
	}
	known := newAccounts(t, env, 1)[0]
	const unknown = "0193e000-0000-7000-8000-000000000000"
	const someID = "0193e000-0000-7000-8000-0000000000ff"

	cases := []struct {
		command string // as commandPath names it
		args    []string
	}{
		{"accounts get", []string{"accounts", "get", unknown}},
		{"accounts get", []string{"accounts", "get", "--account", unknown, "--json"}},
		{"accounts enable-live", []string{"accounts", "enable-live", "--account", strings.ToUpper(unknown)}},
		{"accounts set-rate-limit", []string{"accounts", "set-rate-limit", "--account", unknown, "--per-minute", "10"}},
		{"users invite", []string{"users", "invite", "--account", unknown, "--email", "ann@example.com"}},
		{"users list", []string{"users", "list", "--account", unknown}},
		{"users list", []string{"users", "list", "--account", unknown, "--json"}},
		// Not "user U not found", which would blame the user.
		{"users remove", []string{"users", "remove", "--account", unknown, "--user", someID}},
		{"keys create", []string{"keys", "create", "--account", unknown, "--env", "sandbox"}},
		{"keys list", []string{"keys", "list", "--account", unknown, "--json"}},
		// Not "revoke key K: not found", which would blame the key.
		{"keys revoke", []string{"keys", "revoke", "--account", unknown, "--key", someID}},
		{"wallet topup", []string{"wallet", "topup", "--account", unknown, "--env", "sandbox", "--amount", "10"}},
		{"wallet balance", []string{"wallet", "balance", "--account", unknown, "--env", "live"}},
		{"wallet ledger", []string{"wallet", "ledger", "--account", unknown, "--env", "sandbox", "--json"}},
		{"orders list", []string{"orders", "list", "--account", unknown, "--env", "sandbox"}},
		{"orders list", []string{"orders", "list", "--account", unknown, "--env", "live", "--json"}},
		{"esims list", []string{"esims", "list", "--account", unknown, "--env", "sandbox"}},
		{"esims simulate", []string{"esims", "simulate", "--esim", someID, "--account", unknown, "--action", "install"}},
		{"events list", []string{"events", "list", "--account", unknown, "--env", "sandbox"}},
		{"events list", []string{"events", "list", "--account", unknown, "--env", "live", "--json"}},
		{"webhooks set", []string{"webhooks", "set", "--account", unknown, "--env", "sandbox", "--url", "https://partner.example/hooks"}},
		{"webhooks show", []string{"webhooks", "show", "--account", unknown, "--env", "sandbox"}},
		{"webhooks rotate-secret", []string{"webhooks", "rotate-secret", "--account", unknown, "--env", "live"}},
		{"webhooks send-test", []string{"webhooks", "send-test", "--account", unknown, "--env", "sandbox", "--wait"}},
		{"webhooks listen", []string{"webhooks", "listen", "--account", unknown, "--env", "sandbox", "--addr", "127.0.0.1:0"}},
	}
	tested := map[string]bool{}
	for _, tc := range cases {
		tested[tc.command] = true
		r := esimctl(t, env, tc.args...)
		r.wantError(t, 1, "esimctl: account "+unknown+" not found; `esimctl accounts list` shows the accounts there are")
		if strings.Contains(r.stderr, "Run '") {
			t.Errorf("esimctl %s: a failure points to --help:\n%s", strings.Join(tc.args, " "), r.stderr)
		}
	}
	for name, calls := range map[string]int64{"ordering": orderingCalls.Load(), "webhook": webhookCalls.Load(), "wallet": walletCalls.Load()} {
		if calls != 0 {
			t.Errorf("the %s service was called %d times for an unknown account, want never", name, calls)
		}
	}

	// The same commands go on for a known account: the check is the
	// account's, not a refusal of every id.
	esimctl(t, env, "orders", "list", "--account", known, "--env", "sandbox").ok(t)
	esimctl(t, env, "events", "list", "--account", known, "--env", "sandbox").ok(t)
	esimctl(t, env, "esims", "list", "--account", known, "--env", "live").ok(t)
	if orderingCalls.Load() != 2 || webhookCalls.Load() != 1 {
		t.Errorf("a known account's lists: %d ordering and %d webhook calls, want 2 and 1", orderingCalls.Load(), webhookCalls.Load())
	}

	// Every command that takes an account is above.
	var takes []string
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if !cmd.HasSubCommands() && cmd.HasParent() && cmd.Flags().Lookup("account") != nil {
			takes = append(takes, commandPath(cmd))
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk((&cli{stdout: io.Discard, stderr: io.Discard}).rootCommand(func(string) string { return "" }))
	if len(takes) < 15 {
		t.Fatalf("found only %d commands with --account: %v", len(takes), takes)
	}
	for _, name := range takes {
		if !tested[name] {
			t.Errorf("%s takes --account but is not tested for an unknown one here", name)
		}
	}
	for name := range tested {
		if !slices.Contains(takes, name) {
			t.Errorf("%s is tested here but takes no --account", name)
		}
	}
}
