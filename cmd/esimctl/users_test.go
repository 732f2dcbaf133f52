package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// signUp makes an account as the portal does, live disabled.
func signUp(t *testing.T, accountsURL, email string) *accountsv1.SessionResponse {
	t.Helper()
	portal := accountsv1.NewAccountsProtobufClient(accountsURL, internalauthtest.As(http.DefaultClient, internalauth.Portal))
	resp, err := portal.SignUp(context.Background(), &accountsv1.SignUpRequest{Email: email, Password: "correct horse battery", AccountName: "Self Served"})
	if err != nil {
		t.Fatalf("SignUp: %v", err)
	}
	return resp
}

// TestEnableLive: a signed-up account shows live disabled, with the
// command that changes it, until enable-live; then its live keys work.
func TestEnableLive(t *testing.T) {
	accountsURL := startAccounts(t)
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	id := signUp(t, accountsURL, "ann@example.com").GetSession().GetAccount().GetId()

	var a account
	esimctl(t, env, "accounts", "get", id, "--json").ok(t).data(t, &a)
	if a.LiveEnabled {
		t.Errorf("signed-up account: live_enabled true")
	}
	if out := esimctl(t, env, "accounts", "get", id).ok(t).stdout; !strings.Contains(out, "live:") || !strings.Contains(out, "disabled (esimctl accounts enable-live --account "+id+")") {
		t.Errorf("accounts get:\n%s\nwant live disabled and the command that enables it", out)
	}
	esimctl(t, env, "keys", "create", "--account", id, "--env", "live").wantError(t, 1,
		"create key for account "+id, "live is not enabled for this account", "esimctl accounts enable-live")

	if out := esimctl(t, env, "accounts", "enable-live", strings.ToUpper(id)).ok(t).stdout; out != "account "+id+" (Self Served): live enabled\n" {
		t.Errorf("enable-live printed %q", out)
	}
	esimctl(t, env, "accounts", "enable-live", id, "--json").ok(t).data(t, &a)
	if !a.LiveEnabled || a.ID != id {
		t.Errorf("enable-live --json = %+v; want live_enabled", a)
	}
	esimctl(t, env, "keys", "create", "--account", id, "--env", "live").ok(t)

	var other account
	esimctl(t, env, "accounts", "create", "--name", "Operated", "--json").ok(t).data(t, &other)
	if !other.LiveEnabled {
		t.Error("an operator's account starts without live")
	}
	list := esimctl(t, env, "accounts", "list").ok(t).stdout
	if !strings.Contains(list, "LIVE") || strings.Count(list, " yes ") != 2 {
		t.Errorf("accounts list:\n%s\nwant a LIVE column, yes for both", list)
	}
}

func TestUsersInvite(t *testing.T) {
	accountsURL := startAccounts(t)
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	var a account
	esimctl(t, env, "accounts", "create", "--name", "Acme", "--json").ok(t).data(t, &a)

	r := esimctl(t, env, "users", "invite", "--account", a.ID, "--email", " Ann@Example.com")
	r.ok(t)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "invite for ann@example.com to account "+a.ID+", valid until ") ||
		!strings.HasPrefix(lines[1], "http://127.0.0.1:8087/invite/pi_") {
		t.Fatalf("users invite printed:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "works once") {
		t.Errorf("no warning on stderr: %q", r.stderr)
	}
	token := strings.TrimPrefix(lines[1], "http://127.0.0.1:8087/invite/")

	// The link's token signs the person up in the portal.
	portal := accountsv1.NewAccountsProtobufClient(accountsURL, internalauthtest.As(http.DefaultClient, internalauth.Portal))
	accepted, err := portal.AcceptInvite(context.Background(), &accountsv1.AcceptInviteRequest{Token: token, Password: "a good long password"})
	if err != nil || accepted.GetSession().GetAccount().GetId() != a.ID || accepted.GetSession().GetUser().GetEmail() != "ann@example.com" {
		t.Fatalf("AcceptInvite with the printed link's token = %v, %v", accepted, err)
	}

	// --json, and the portal's address from the environment, its trailing
	// slash dropped.
	env["ESIM_PORTAL_URL"] = "https://portal.example.com/"
	var inv struct {
		AccountID string `json:"account_id"`
		Email     string `json:"email"`
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	}
	esimctl(t, env, "users", "invite", "--account", a.ID, "--email", "bob@example.com", "--json").ok(t).data(t, &inv)
	expires, err := time.Parse(time.RFC3339, inv.ExpiresAt)
	if inv.AccountID != a.ID || inv.Email != "bob@example.com" || !strings.HasPrefix(inv.URL, "https://portal.example.com/invite/pi_") ||
		err != nil || time.Until(expires) < 71*time.Hour {
		t.Errorf("users invite --json = %+v; want the portal URL and an expiry about 72h out", inv)
	}
	esimctl(t, env, "users", "invite", "--account", a.ID, "--email", "bob@example.com", "--portal-url", "http://localhost:9999", "--json").ok(t).data(t, &inv)
	if !strings.HasPrefix(inv.URL, "http://localhost:9999/invite/pi_") {
		t.Errorf("--portal-url ignored: %s", inv.URL)
	}

	// Refusals: another account's user (exit 1), a bad email or portal
	// URL (usage, exit 2; the URL before any call).
	signUp(t, accountsURL, "cat@example.com")
	esimctl(t, env, "users", "invite", "--account", a.ID, "--email", "cat@example.com").wantError(t, 1,
		"invite to account "+a.ID+": email is already registered to another account")
	esimctl(t, env, "users", "invite", "--account", a.ID, "--email", "nope").wantError(t, 2, "invite to account "+a.ID+": email: ")
	esimctl(t, env, "users", "invite", "--account", a.ID, "--email", "dan@example.com", "--portal-url", "portal:8087").wantError(t, 2, "invalid --portal-url")
	esimctl(t, env, "users", "invite", "--account", a.ID).wantError(t, 2, "email")
}
