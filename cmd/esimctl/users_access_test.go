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

// portalClient is the accounts service as the portal calls it.
func portalClient(accountsURL string) accountsv1.Accounts {
	return accountsv1.NewAccountsProtobufClient(accountsURL, internalauthtest.As(http.DefaultClient, internalauth.Portal))
}

func TestUsersListAndRemove(t *testing.T) {
	accountsURL := startAccounts(t)
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	ann := signUp(t, accountsURL, "ann@example.com").GetSession()
	id := ann.GetAccount().GetId()
	inv, err := portalClient(accountsURL).InviteUser(context.Background(), &accountsv1.InviteUserRequest{AccountId: id, Email: "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := portalClient(accountsURL).AcceptInvite(context.Background(), &accountsv1.AcceptInviteRequest{Token: inv.GetToken(), Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	bobID := bob.GetSession().GetUser().GetId()

	out := esimctl(t, env, "users", "list", "--account", id).ok(t).stdout
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID EMAIL CREATED" ||
		!strings.HasPrefix(lines[1], ann.GetUser().GetId()+"  ") || !strings.Contains(lines[1], "ann@example.com") ||
		!strings.HasPrefix(lines[2], bobID+"  ") || !strings.Contains(lines[2], "bob@example.com") {
		t.Fatalf("users list:\n%s\nwant ID, EMAIL, CREATED and ann then bob", out)
	}
	var users []struct {
		ID, Email, AccountID string
		CreatedAt            string `json:"created_at"`
	}
	esimctl(t, env, "users", "list", "--account", id, "--json").ok(t).data(t, &users)
	if len(users) != 2 || users[1].ID != bobID || users[1].Email != "bob@example.com" || users[1].CreatedAt == "" {
		t.Errorf("users list --json = %+v", users)
	}

	// Refusals: another account's user, an unknown one, the last user.
	other := signUp(t, accountsURL, "cat@example.com").GetSession()
	esimctl(t, env, "users", "remove", "--account", id, "--user", other.GetUser().GetId()).wantError(t, 1,
		"user "+other.GetUser().GetId()+" not found in account "+id, "esimctl users list --account "+id)
	esimctl(t, env, "users", "remove", "--account", other.GetAccount().GetId(), "--user", other.GetUser().GetId()).wantError(t, 1,
		"remove user "+other.GetUser().GetId()+" of account "+other.GetAccount().GetId()+": the account's last user cannot be removed")
	esimctl(t, env, "users", "remove", "--account", id).wantError(t, 2, "user")

	if out := esimctl(t, env, "users", "remove", "--account", id, "--user", bobID).ok(t).stdout; out != "removed user "+bobID+" from account "+id+"; their sessions have ended\n" {
		t.Errorf("users remove printed %q", out)
	}
	if _, err := portalClient(accountsURL).GetSession(context.Background(), &accountsv1.GetSessionRequest{Token: bob.GetToken()}); err == nil {
		t.Error("a removed user's session still works")
	}
	if out := esimctl(t, env, "users", "list", "--account", id).ok(t).stdout; strings.Contains(out, "bob@") {
		t.Errorf("users list after remove:\n%s", out)
	}
}

func TestUsersResetLink(t *testing.T) {
	accountsURL := startAccounts(t)
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	ann := signUp(t, accountsURL, "ann@example.com")

	r := esimctl(t, env, "users", "reset-link", "--email", " ANN@example.com")
	r.ok(t)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "password reset for ann@example.com (user "+ann.GetSession().GetUser().GetId()+" of account "+ann.GetSession().GetAccount().GetId()+"), valid until ") ||
		!strings.HasPrefix(lines[1], "http://127.0.0.1:8087/reset/pr_") {
		t.Fatalf("users reset-link printed:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "works once") {
		t.Errorf("no warning on stderr: %q", r.stderr)
	}
	token := strings.TrimPrefix(lines[1], "http://127.0.0.1:8087/reset/")
	const next = "a brand new passphrase"
	if _, err := portalClient(accountsURL).ResetPassword(context.Background(), &accountsv1.ResetPasswordRequest{Token: token, Password: next}); err != nil {
		t.Fatalf("ResetPassword with the printed link's token: %v", err)
	}
	if _, err := portalClient(accountsURL).SignIn(context.Background(), &accountsv1.SignInRequest{Email: "ann@example.com", Password: next}); err != nil {
		t.Errorf("sign-in with the new password: %v", err)
	}

	env["ESIM_PORTAL_URL"] = "https://portal.example.com/"
	var v struct {
		UserID    string `json:"user_id"`
		AccountID string `json:"account_id"`
		Email     string `json:"email"`
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	}
	esimctl(t, env, "users", "reset-link", "--email", "ann@example.com", "--json").ok(t).data(t, &v)
	expires, err := time.Parse(time.RFC3339, v.ExpiresAt)
	if v.Email != "ann@example.com" || v.AccountID != ann.GetSession().GetAccount().GetId() || !strings.HasPrefix(v.URL, "https://portal.example.com/reset/pr_") ||
		err != nil || time.Until(expires) < 23*time.Hour {
		t.Errorf("users reset-link --json = %+v", v)
	}

	esimctl(t, env, "users", "reset-link", "--email", "nobody@example.com").wantError(t, 1, "no portal user has the email nobody@example.com")
	esimctl(t, env, "users", "reset-link", "--email", "nope").wantError(t, 2, "password reset for nope: email: ")
	esimctl(t, env, "users", "reset-link", "--email", "ann@example.com", "--portal-url", "portal:8087").wantError(t, 2, "invalid --portal-url")
	esimctl(t, env, "users", "reset-link").wantError(t, 2, "email")
}

func TestAccountsRequests(t *testing.T) {
	accountsURL := startAccounts(t)
	env := map[string]string{"ESIM_ACCOUNTS_URL": accountsURL}
	if out := esimctl(t, env, "accounts", "requests").ok(t).stdout; out != "no requests for live are waiting\n" {
		t.Errorf("accounts requests with none: %q", out)
	}
	ann := signUp(t, accountsURL, "ann@example.com").GetSession()
	id := ann.GetAccount().GetId()
	if _, err := portalClient(accountsURL).RequestLive(context.Background(), &accountsv1.RequestLiveRequest{AccountId: id, UserId: ann.GetUser().GetId()}); err != nil {
		t.Fatal(err)
	}
	out := esimctl(t, env, "accounts", "requests").ok(t).stdout
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ACCOUNT ID NAME REQUESTED BY REQUESTED AT" ||
		!strings.HasPrefix(lines[1], id+"  ") || !strings.Contains(lines[1], "Self Served") || !strings.Contains(lines[1], "ann@example.com") ||
		lines[2] != "grant one with: esimctl accounts enable-live --account ID" {
		t.Fatalf("accounts requests:\n%s", out)
	}
	var reqs []struct {
		AccountID   string `json:"account_id"`
		RequestedBy string `json:"requested_by"`
		RequestedAt string `json:"requested_at"`
	}
	esimctl(t, env, "accounts", "requests", "--json").ok(t).data(t, &reqs)
	if len(reqs) != 1 || reqs[0].AccountID != id || reqs[0].RequestedBy != "ann@example.com" || reqs[0].RequestedAt == "" {
		t.Errorf("accounts requests --json = %+v", reqs)
	}
	esimctl(t, env, "accounts", "enable-live", "--account", id).ok(t)
	if out := esimctl(t, env, "accounts", "requests").ok(t).stdout; out != "no requests for live are waiting\n" {
		t.Errorf("accounts requests after enable-live: %q", out)
	}
	esimctl(t, env, "accounts", "requests", "extra").wantError(t, 2)
}
