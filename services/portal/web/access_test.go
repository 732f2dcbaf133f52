package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/portal/portaltest"
)

// inviteLinkOn reads the invite link the users page shows once.
func inviteLinkOn(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`id="invite-url" type="text" readonly value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no invite link on the page:\n%.3000s", page)
	}
	return m[1]
}

func TestUsersPage(t *testing.T) {
	p := portaltest.Start(t)
	ann := p.SignUp("Team Travel", "EUR")
	other := p.SignUp("Other Travel", "EUR")

	must(t, "users page", ann.Get("/settings/users"), http.StatusOK, ann.Email, "The only user", "Invite a colleague")
	must(t, "a malformed email", ann.Post("/settings/users", url.Values{"email": {"nope"}}), http.StatusBadRequest, "Email must be an email address")
	must(t, "another account's user", ann.Post("/settings/users", url.Values{"email": {other.Email}}), http.StatusBadRequest,
		"This email already belongs to a user of another account.")
	// A user of the account is not invited again: whoever holds the link
	// would set their password.
	must(t, "a user of the account", ann.Post("/settings/users", url.Values{"email": {ann.Email}}), http.StatusBadRequest,
		"This email is already a user of this account.")
	bob := portaltest.UniqueEmail("bob")
	res := ann.Post("/settings/users", url.Values{"email": {strings.ToUpper(bob)}})
	must(t, "invite", res, http.StatusOK, "Invite link for "+bob, "shown only once")
	link := inviteLinkOn(t, res.Body)
	if !strings.HasPrefix(link, p.URL+"/invite/pi_") {
		t.Fatalf("invite link %q: want one on the portal's own origin", link)
	}
	token := strings.TrimPrefix(link, p.URL+"/invite/")
	if !strings.Contains(res.Header.Get("Cache-Control"), "no-store") {
		t.Error("the page with the invite link may be cached")
	}

	// Dead links ask for no password.
	for what, tok := range map[string]string{"an unknown token": "pi_" + strings.Repeat("A", 43), "garbage": "x"} {
		res := p.NewBrowser().Get("/invite/" + tok)
		must(t, "the invite page of "+what, res, http.StatusNotFound, "This invitation is not valid")
		if strings.Contains(res.Body, `name="password"`) {
			t.Errorf("the invite page of %s asks for a password", what)
		}
	}

	// Opened where another user is signed in, the page says so; a post
	// without the confirmation (the page was shown before that user
	// signed in) switches nobody and spends nothing.
	must(t, "the invite, signed out", p.NewBrowser().Get("/invite/"+token), http.StatusOK, "join <strong>Team Travel</strong> as <strong>"+bob+"</strong>", "Join and sign in")
	must(t, "the invite, signed in as other", other.Get("/invite/"+token), http.StatusOK, "You are signed in here as <strong>"+other.Email, `name="switch"`)
	res = other.Post("/invite/"+token, url.Values{"password": {portaltest.Password}})
	must(t, "accept without confirming the switch", res, http.StatusConflict, "You are now signed in as "+other.Email)
	if got := p.AccountOf(other.Browser); got != other.AccountID {
		t.Fatalf("the unconfirmed accept switched the browser to %s", got)
	}
	// The same invite, unspent, still works once confirmed.
	oldCookie := other.SessionCookie()
	res = other.Post("/invite/"+token, url.Values{"password": {portaltest.Password}, "switch": {"1"}})
	if res.Status != http.StatusSeeOther || res.Location() != "/sandbox/" {
		t.Fatalf("accept with the switch confirmed: %d\n%.2000s", res.Status, res.Body)
	}
	if got := p.AccountOf(other.Browser); got != ann.AccountID {
		t.Errorf("after accepting, the browser is in %s, want Team Travel %s", got, ann.AccountID)
	}
	replay := p.NewBrowser()
	replay.SetSessionCookie(oldCookie)
	if res := replay.Get("/sandbox/"); res.Status != http.StatusSeeOther {
		t.Errorf("the session the invite replaced still works: %d", res.Status)
	}
	bobBrowser := other.Browser

	// Removal: another account's user and an unknown id are not found;
	// the last user is refused; a removed user's browser is signed out.
	users, err := p.Accounts.ListUsers(context.Background(), &accountsv1.ListUsersRequest{AccountId: ann.AccountID})
	if err != nil || len(users.GetUsers()) != 2 {
		t.Fatalf("ListUsers = %v, %v", users, err)
	}
	annID, bobID := users.GetUsers()[0].GetId(), users.GetUsers()[1].GetId()
	otherUsers, err := p.Accounts.ListUsers(context.Background(), &accountsv1.ListUsersRequest{AccountId: other.AccountID})
	if err != nil {
		t.Fatal(err)
	}
	otherID := otherUsers.GetUsers()[0].GetId()
	must(t, "remove page of another account's user", ann.Get("/settings/users/"+otherID+"/remove"), http.StatusNotFound)
	must(t, "remove another account's user", ann.Post("/settings/users/"+otherID+"/remove", nil), http.StatusNotFound)
	must(t, "remove a malformed id", ann.Post("/settings/users/nope/remove", nil), http.StatusNotFound)
	must(t, "remove page", ann.Get("/settings/users/"+bobID+"/remove"), http.StatusOK, "Remove <strong>"+bob+"</strong> from Team Travel?")
	if res := ann.Post("/settings/users/"+bobID+"/remove", nil); res.Status != http.StatusSeeOther || res.Location() != "/settings/users?done=removed" {
		t.Fatalf("remove bob: %d %s", res.Status, res.Location())
	}
	if res := bobBrowser.Get("/sandbox/"); res.Status != http.StatusSeeOther || !strings.HasPrefix(res.Location(), "/signin") {
		t.Errorf("a removed user's browser: %d %s", res.Status, res.Location())
	}
	must(t, "remove oneself, the last user", ann.Post("/settings/users/"+annID+"/remove", nil), http.StatusConflict, "last user cannot be removed")
	must(t, "still signed in", ann.Get("/settings/users"), http.StatusOK, ann.Email)

	// Removing oneself, not the last, signs one out.
	cat := portaltest.UniqueEmail("cat")
	catLink := inviteLinkOn(t, ann.Post("/settings/users", url.Values{"email": {cat}}).Body)
	catBrowser := p.NewBrowser()
	if res := catBrowser.Post(strings.TrimPrefix(catLink, p.URL), url.Values{"password": {portaltest.Password}}); res.Status != http.StatusSeeOther {
		t.Fatalf("cat accepts: %d", res.Status)
	}
	if res := ann.Post("/settings/users/"+annID+"/remove", nil); res.Status != http.StatusSeeOther || res.Location() != "/signin" {
		t.Errorf("remove oneself: %d %s", res.Status, res.Location())
	}
	if res := p.NewBrowser().Post("/signin", url.Values{"email": {ann.Email}, "password": {ann.Password}}); res.Status != http.StatusUnauthorized {
		t.Errorf("a removed user signs in: %d", res.Status)
	}
}

func TestResetPage(t *testing.T) {
	p := portaltest.Start(t)
	ann := p.SignUp("Reset Travel", "EUR")
	other := p.SignUp("Other Travel", "EUR")
	must(t, "the sign-in page", p.NewBrowser().Get("/signin"), http.StatusOK, "Forgot your password?", "password reset link")

	reset, err := p.Accounts.CreatePasswordReset(context.Background(), &accountsv1.CreatePasswordResetRequest{Email: ann.Email})
	if err != nil {
		t.Fatal(err)
	}
	path := "/reset/" + reset.GetToken()
	res := p.NewBrowser().Get("/reset/pr_" + strings.Repeat("A", 43))
	must(t, "an unknown reset link", res, http.StatusNotFound, "This password reset link is not valid")
	if strings.Contains(res.Body, `name="password"`) {
		t.Error("an unknown reset link asks for a password")
	}
	b := p.NewBrowser()
	must(t, "the reset page", b.Get(path), http.StatusOK, "new password for <strong>"+ann.Email+"</strong> (Reset Travel)")
	must(t, "a short password", b.Post(path, url.Values{"password": {"x"}}), http.StatusBadRequest, "Password must be at least")
	must(t, "signed in as another", other.Get(path), http.StatusOK, "You are signed in here as <strong>"+other.Email)
	must(t, "reset without confirming the switch", other.Post(path, url.Values{"password": {"a brand new passphrase"}}), http.StatusConflict, "You are now signed in as")
	// Neither refusal spent the link or changed the password.
	p.SignIn(ann.Email, ann.Password)

	if res := b.Post(path, url.Values{"password": {"a brand new passphrase"}}); res.Status != http.StatusSeeOther || res.Location() != "/settings/password?done=1" {
		t.Fatalf("reset: %d %s\n%.2000s", res.Status, res.Location(), res.Body)
	}
	if got := p.AccountOf(b); got != ann.AccountID {
		t.Errorf("signed in to %s after the reset, want %s", got, ann.AccountID)
	}
	if res := ann.Get("/sandbox/"); res.Status != http.StatusSeeOther {
		t.Errorf("a session from before the reset still works: %d", res.Status)
	}
	p.SignIn(ann.Email, "a brand new passphrase")
	must(t, "the link used again", p.NewBrowser().Post(path, url.Values{"password": {"yet another passphrase"}}), http.StatusNotFound, "This password reset link is not valid")
}

func TestLiveAccess(t *testing.T) {
	p := portaltest.Start(t)
	u := p.SignUp("Sandbox Only", "USD")
	res := u.Get("/live/keys")
	must(t, "live keys of a sandbox-only account", res, http.StatusOK, `<a href="/live/access">request live access</a>`)
	if strings.Contains(res.Body, `action="/live/keys"`) {
		t.Error("the live keys page offers the form that fails")
	}
	must(t, "the key form posted anyway", u.Post("/live/keys", url.Values{"name": {"prod"}}), http.StatusForbidden, "request live access at /live/access")
	must(t, "live access, not asked yet", u.Get("/live/access"), http.StatusOK, "Live is not enabled for Sandbox Only yet", `action="/live/access"`)
	if res := u.Post("/live/access", nil); res.Status != http.StatusSeeOther || res.Location() != "/live/access?done=1" {
		t.Fatalf("request live: %d %s", res.Status, res.Location())
	}
	res = u.Get("/live/access?done=1")
	must(t, "live access, asked", res, http.StatusOK, "Your request was sent", "Live was requested for Sandbox Only by "+u.Email)
	if strings.Contains(res.Body, `action="/live/access"`) {
		t.Error("the page offers to ask again")
	}
	list, err := p.Accounts.ListLiveRequests(context.Background(), &accountsv1.ListLiveRequestsRequest{})
	if err != nil || len(list.GetRequests()) != 1 || list.GetRequests()[0].GetAccount().GetId() != u.AccountID {
		t.Fatalf("ListLiveRequests = %v, %v", list, err)
	}
	if _, err := p.Accounts.EnableLive(context.Background(), &accountsv1.EnableLiveRequest{AccountId: u.AccountID}); err != nil {
		t.Fatal(err)
	}
	if res := u.Get("/live/access"); res.Status != http.StatusSeeOther || res.Location() != "/live/" {
		t.Errorf("live access once granted: %d %s", res.Status, res.Location())
	}
	if res := u.Post("/live/access", nil); res.Status != http.StatusSeeOther || res.Location() != "/live/" {
		t.Errorf("asking once granted: %d %s", res.Status, res.Location())
	}
	must(t, "live keys once granted", u.Get("/live/keys"), http.StatusOK, `action="/live/keys"`)
	if res := p.NewBrowser().Get("/live/access"); res.Status != http.StatusSeeOther || !strings.HasPrefix(res.Location(), "/signin") {
		t.Errorf("live access signed out: %d %s", res.Status, res.Location())
	}
}
