package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/portal/portaltest"
)

// TestAccessInABrowser walks self-serve access in Chromium: Ann signs up
// and invites Bob from the users page; Bob's link, opened where Ann is
// signed in, names the account and his email and says Ann is signed out
// before it switches; Bob removes Ann and cannot remove himself, the last
// user. An operator's `esimctl users reset-link` gives Bob a new password
// through the reset page, which he then signs in with. Bob asks for live,
// the real esimctl sees the request and grants it with enable-live, and
// the live side, which offered no key form before, makes a live key.
func TestAccessInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a real browser")
	}
	esimctl := buildEsimctl(t)
	p := portaltest.Start(t)
	operatorEnv := append(os.Environ(), "ESIM_ACCOUNTS_URL="+p.AccountsURL, "ESIM_PORTAL_URL="+p.URL,
		"ESIM_OPERATOR_TOKEN="+internalauthtest.Token(internalauth.Operator))
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(esimctl, args...)
		cmd.Env = operatorEnv
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("esimctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	shots, err := os.MkdirTemp("", "esim-portal-access-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", shots)

	_, run := openBrowser(t)
	shoot := func(name string) {
		t.Helper()
		var png []byte
		run("screenshot "+name, into(&png, chromedp.FullScreenshot(100)))
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(step, sel string) string {
		t.Helper()
		var s string
		run(step, chromedp.WaitVisible(chromedp.CSS(sel)), into(&s, chromedp.Text(chromedp.CSS(sel))))
		return s
	}
	count := func(step, sel string) int {
		t.Helper()
		var n int
		run(step, into(&n, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))))
		return n
	}
	at := func(step, want string) {
		t.Helper()
		var location string
		run(step, into(&location, chromedp.Location()))
		if location != p.URL+want {
			t.Fatalf("%s: at %s, want %s%s", step, location, p.URL, want)
		}
	}
	const annPassword, bobPassword, bobNext = "ann's long passphrase", "bob's long passphrase", "bob's brand new passphrase"
	ann, bob := portaltest.UniqueEmail("ann"), portaltest.UniqueEmail("bob")

	// Ann signs up and invites Bob from the users page.
	run("sign up", chromedp.Navigate(p.URL+"/signup"), chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), ann),
		chromedp.SendKeys(chromedp.CSS("#password"), annPassword),
		chromedp.SendKeys(chromedp.CSS("#account_name"), "Access Travel"),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav.switch`)))
	run("users page", chromedp.Click(chromedp.CSS(`header a[href="/settings/users"]`)), chromedp.WaitVisible(chromedp.CSS(`#users-heading`)))
	if list := text("the users", "main table"); !strings.Contains(list, ann) || !strings.Contains(list, "The only user") {
		t.Errorf("the users page lists:\n%s\nwant Ann alone, without a remove link", list)
	}
	var link string
	run("invite Bob", chromedp.SendKeys(chromedp.CSS("#email"), bob),
		chromedp.Click(chromedp.CSS(`form[action="/settings/users"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#invite-url")),
		into(&link, chromedp.Value(chromedp.CSS("#invite-url"))))
	shoot("users-invited")
	if !strings.HasPrefix(link, p.URL+"/invite/pi_") {
		t.Fatalf("the invite link is %q", link)
	}

	// Bob's link, opened where Ann is signed in: it names the account and
	// Bob's email, and says Ann would be signed out.
	run("the invite", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#password")))
	shoot("invite-signed-in")
	page := text("the invite page", "main")
	for _, want := range []string{"join Access Travel as " + bob, "You are signed in here as " + ann, "Sign out " + ann + " and join"} {
		if !strings.Contains(page, want) {
			t.Errorf("the invite page lacks %q:\n%s", want, page)
		}
	}
	run("accept", chromedp.SendKeys(chromedp.CSS("#password"), bobPassword),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav.switch`)))
	at("joined", "/sandbox/")
	if who := text("who is signed in", "header .who .email"); who != bob {
		t.Errorf("signed in as %q after accepting, want %s", who, bob)
	}

	// Bob removes Ann; then, the last user, cannot remove himself.
	run("users page as Bob", chromedp.Navigate(p.URL+"/settings/users"), chromedp.WaitVisible(chromedp.CSS(`#users-heading`)))
	if n := count("remove links", `main table a[href$="/remove"]`); n != 2 {
		t.Errorf("%d remove links for two users, want 2", n)
	}
	var annRemove string
	run("Ann's remove link", into(&annRemove, chromedp.Evaluate[string](
		fmt.Sprintf(`[...document.querySelectorAll("main table tr")].find(r => r.textContent.includes(%q)).querySelector("a").getAttribute("href")`, ann))))
	run("remove Ann", chromedp.Navigate(p.URL+annRemove), chromedp.WaitVisible(chromedp.CSS(`button.danger`)))
	if page := text("the confirmation", "main"); !strings.Contains(page, "Remove "+ann+" from Access Travel?") {
		t.Errorf("the confirmation says:\n%s", page)
	}
	shoot("remove-confirm")
	run("confirm", chromedp.Click(chromedp.CSS(`button.danger`)), chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	at("removed", "/settings/users?done=removed")
	if list := text("the users", "main table"); strings.Contains(list, ann) || !strings.Contains(list, "The only user") {
		t.Errorf("after removing Ann the users page lists:\n%s", list)
	}
	if res := p.NewBrowser().Post("/signin", url.Values{"email": {ann}, "password": {annPassword}}); res.Status != http.StatusUnauthorized {
		t.Errorf("Ann signs in after her removal: %d", res.Status)
	}
	accountID, bobID := accountAndUser(t, p, "Access Travel", bob)
	run("remove himself", chromedp.Navigate(p.URL+"/settings/users/"+bobID+"/remove"), chromedp.WaitVisible(chromedp.CSS(`button.danger`)),
		chromedp.Click(chromedp.CSS(`button.danger`)), chromedp.WaitVisible(chromedp.CSS(`p.error`)))
	if msg := text("the refusal", "p.error"); !strings.Contains(msg, "last user cannot be removed") {
		t.Errorf("removing the last user says %q", msg)
	}
	shoot("last-user")

	// A password reset link from esimctl: the sign-in page says how to get
	// one; the link's page names Bob; the new password signs him in.
	run("sign out", chromedp.Click(chromedp.CSS(`header form[action="/signout"] button`)), chromedp.WaitVisible(chromedp.CSS(`#forgot`)))
	if forgot := text("the sign-in page", "#forgot"); !strings.Contains(forgot, "password reset link") {
		t.Errorf("the sign-in page says %q about a forgotten password", forgot)
	}
	out := cli("users", "reset-link", "--email", bob)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	reset := lines[len(lines)-1]
	if !strings.HasPrefix(reset, p.URL+"/reset/pr_") {
		t.Fatalf("esimctl users reset-link printed:\n%s", out)
	}
	run("the reset page", chromedp.Navigate(reset), chromedp.WaitVisible(chromedp.CSS("#password")))
	shoot("reset")
	if page := text("the reset page", "main"); !strings.Contains(page, "new password for "+bob+" (Access Travel)") {
		t.Errorf("the reset page says:\n%s", page)
	}
	run("reset", chromedp.SendKeys(chromedp.CSS("#password"), bobNext),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	at("reset done", "/settings/password?done=1")
	run("sign out again", chromedp.Click(chromedp.CSS(`header form[action="/signout"] button`)), chromedp.WaitVisible(chromedp.CSS(`#forgot`)))
	run("the used link", chromedp.Navigate(reset), chromedp.WaitVisible(chromedp.CSS(`p.error`)))
	if n := count("password fields on a used link", "#password"); n != 0 {
		t.Error("a used reset link still asks for a password")
	}
	run("sign in with the new password", chromedp.Navigate(p.URL+"/signin"), chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), bob), chromedp.SendKeys(chromedp.CSS("#password"), bobNext),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`nav.switch`)))
	at("signed in", "/sandbox/")
	if res := p.NewBrowser().Post("/signin", url.Values{"email": {bob}, "password": {bobPassword}}); res.Status != http.StatusUnauthorized {
		t.Errorf("the old password still signs in: %d", res.Status)
	}

	// Live: the sandbox-only account's live keys page offers no form but
	// the way to ask; the request reaches esimctl, which grants it.
	run("live keys", chromedp.Navigate(p.URL+"/live/keys"), chromedp.WaitVisible(chromedp.CSS(`.banner.warn`)))
	if n := count("live key forms", `form[action="/live/keys"]`); n != 0 {
		t.Error("the live keys page of a sandbox-only account offers the form that fails")
	}
	shoot("live-disabled")
	run("ask for live", chromedp.Click(chromedp.CSS(`.banner.warn a[href="/live/access"]`)), chromedp.WaitVisible(chromedp.CSS(`form[action="/live/access"] button`)),
		chromedp.Click(chromedp.CSS(`form[action="/live/access"] button`)), chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	shoot("live-requested")
	if page := text("the request", "main"); !strings.Contains(page, "requested for Access Travel by "+bob) {
		t.Errorf("after the request the page says:\n%s", page)
	}
	requests := cli("accounts", "requests")
	if !strings.Contains(requests, accountID) || !strings.Contains(requests, bob) {
		t.Fatalf("esimctl accounts requests:\n%s\nwant account %s asked by %s", requests, accountID, bob)
	}
	cli("accounts", "enable-live", "--account", accountID)
	if requests := cli("accounts", "requests"); requests != "no requests for live are waiting\n" {
		t.Errorf("esimctl accounts requests after enable-live:\n%s", requests)
	}
	var secret string
	run("live keys, granted", chromedp.Navigate(p.URL+"/live/access"), chromedp.WaitVisible(chromedp.CSS(`nav.sections`)))
	at("live access once granted", "/live/")
	run("a live key", chromedp.Navigate(p.URL+"/live/keys"), chromedp.WaitVisible(chromedp.CSS("#name")),
		chromedp.SendKeys(chromedp.CSS("#name"), "production"),
		chromedp.Click(chromedp.CSS(`form[action="/live/keys"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#secret")),
		into(&secret, chromedp.Value(chromedp.CSS("#secret"))))
	if !strings.HasPrefix(secret, "sk_live_") {
		t.Errorf("the live key page shows %q", secret)
	}
	if n := count("banners", `.banner.warn`); n != 0 {
		t.Error("the live-disabled banner still shows once live is granted")
	}
}

// accountAndUser finds, as an operator, the account named name (the
// platform's database is the test's own) and its user of email.
func accountAndUser(t *testing.T, p *portaltest.Platform, name, email string) (accountID, userID string) {
	t.Helper()
	ctx := context.Background()
	list, err := p.Accounts.ListAccounts(ctx, &accountsv1.ListAccountsRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list.GetAccounts() {
		if a.GetName() == name {
			accountID = a.GetId()
		}
	}
	users, err := p.Accounts.ListUsers(ctx, &accountsv1.ListUsersRequest{AccountId: accountID})
	if err != nil {
		t.Fatalf("users of account %q (%s): %v", name, accountID, err)
	}
	for _, u := range users.GetUsers() {
		if u.GetEmail() == email {
			return accountID, u.GetId()
		}
	}
	t.Fatalf("account %q has no user %s", name, email)
	return "", ""
}

// buildEsimctl builds the operator's CLI from this tree, as an operator
// runs it.
func buildEsimctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "esimctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/esimplatform/esim/cmd/esimctl").CombinedOutput(); err != nil {
		t.Fatalf("build esimctl: %v\n%s", err, out)
	}
	return bin
}
