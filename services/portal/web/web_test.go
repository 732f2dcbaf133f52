package web_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/portal/portaltest"
	"github.com/esimplatform/esim/services/portal/redis"
	"github.com/esimplatform/esim/services/portal/web"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// must fails unless res has status and holds every one of wants.
func must(t *testing.T, what string, res portaltest.Response, status int, wants ...string) {
	t.Helper()
	if res.Status != status {
		t.Fatalf("%s: %d (want %d) %s\n%.3000s", what, res.Status, status, res.Location(), res.Body)
	}
	for _, w := range wants {
		if !strings.Contains(res.Body, w) {
			t.Errorf("%s: the page lacks %q\n%.3000s", what, w, res.Body)
		}
	}
}

// api calls the partner API with key.
func api(t *testing.T, p *portaltest.Platform, method, path, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, p.APIURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var secretField = regexp.MustCompile(`id="secret" type="text" readonly value="([^"]+)"`)

var newKeyPage = regexp.MustCompile(`^/(sandbox|live)/new-key/[0-9a-f]{32}$`)

// createKey creates a key named name through the portal, follows the
// redirect to the page that shows it, and returns its secret.
func createKey(t *testing.T, u *portaltest.User, env, name string) string {
	t.Helper()
	res := u.Post("/"+env+"/keys", url.Values{"name": {name}})
	if res.Status != http.StatusSeeOther || !newKeyPage.MatchString(res.Location()) {
		t.Fatalf("create key: %d %s, want 303 to its page\n%.2000s", res.Status, res.Location(), res.Body)
	}
	res = u.Get(res.Location())
	must(t, "new key", res, http.StatusOK, "shown only once", "Copy", name)
	m := secretField.FindStringSubmatch(res.Body)
	if m == nil || !strings.HasPrefix(m[1], "sk_"+env+"_") {
		t.Fatalf("no %s secret on the page:\n%s", env, res.Body)
	}
	return m[1]
}

func TestEveryPageOfAPartner(t *testing.T) {
	p := portaltest.Start(t)
	u := p.SignUp("Globetrotter Ltd", "EUR")

	// Money first: the sandbox top-up of the balance page.
	must(t, "top-up too big", u.Post("/sandbox/balance/topup", url.Values{"amount": {"1000.01"}}), http.StatusBadRequest, "Amount must be from 0.01 to 1,000.00")
	res := u.Post("/sandbox/balance/topup", url.Values{"amount": {"250.5"}})
	if res.Status != http.StatusSeeOther || res.Location() != "/sandbox/balance?done=topup" {
		t.Fatalf("top-up: %d %s %s", res.Status, res.Location(), res.Body)
	}
	must(t, "balance", u.Get("/sandbox/balance?done=topup"), http.StatusOK, "250.50 EUR", "topped up", "top_up", "UTC", `action="/sandbox/balance/topup"`)

	// The empty overview shows a curl against the public API.
	must(t, "empty overview", u.Get("/sandbox/"), http.StatusOK, "No orders yet: place one with this curl", "API="+p.APIURL, "250.50 EUR", "Globetrotter Ltd")

	// A key made in the portal works on the API.
	secret := createKey(t, u, "sandbox", "booking server")
	status, body := api(t, p, http.MethodGet, "/plans?limit=1", secret, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/plans with the portal's key: %d %s", status, body)
	}
	var plans struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.Unmarshal([]byte(body), &plans)
	status, body = api(t, p, http.MethodPost, "/orders", secret, `{"plan_id": "`+plans.Data[0].ID+`", "quantity": 2, "customer": {"reference": "BK-42"}}`)
	if status != http.StatusCreated {
		t.Fatalf("order: %d %s", status, body)
	}
	var order struct {
		Data struct {
			ID    string `json:"id"`
			Esims []struct {
				ICCID          string `json:"iccid"`
				QRCodeURL      string `json:"qr_code_url"`
				ActivationCode string `json:"activation_code"`
				SMDPAddress    string `json:"smdp_address"`
			} `json:"esims"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &order); err != nil || len(order.Data.Esims) != 2 {
		t.Fatalf("order: %v %s", err, body)
	}
	o := order.Data

	must(t, "overview", u.Get("/sandbox/"), http.StatusOK, o.ID, "completed", "No failed deliveries", "Switch to live")
	must(t, "orders", u.Get("/sandbox/orders"), http.StatusOK, o.ID, "BK-42", "UTC", "Page 1 of 1")
	must(t, "orders by reference", u.Get("/sandbox/orders?reference=BK-42&status=completed"), http.StatusOK, o.ID)
	if res := u.Get("/sandbox/orders?reference=nope"); strings.Contains(res.Body, o.ID) || res.Status != http.StatusOK {
		t.Errorf("orders of another reference: %d, lists the order", res.Status)
	}
	detail := u.Get("/sandbox/orders/" + o.ID)
	for _, e := range o.Esims {
		must(t, "order", detail, http.StatusOK, e.ICCID, `src="`+html.EscapeString(e.QRCodeURL)+`"`, html.EscapeString(e.ActivationCode), e.SMDPAddress, "Install instructions", "Copy")
	}
	if res.Header.Get("Content-Security-Policy") == "" {
		t.Error("no Content-Security-Policy")
	}
	csp := detail.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "img-src 'self' "+p.GatewayURL+" data:") || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP = %q", csp)
	}
	if detail.Header.Get("X-Content-Type-Options") != "nosniff" || detail.Header.Get("Referrer-Policy") != "same-origin" {
		t.Errorf("headers: %v", detail.Header)
	}
	// The QR image the page shows is served by the gateway.
	if resp, err := http.Get(o.Esims[0].QRCodeURL); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("QR image: %v %v", resp, err)
	}
	must(t, "balance after the order", u.Get("/sandbox/balance"), http.StatusOK, "debit", o.ID)

	// The order is sandbox's and this account's only.
	must(t, "the order in live", u.Get("/live/orders/"+o.ID), http.StatusNotFound, "Page not found")
	must(t, "a malformed order id", u.Get("/sandbox/orders/nope"), http.StatusNotFound)
	other := p.SignUp("Other Travel", "USD")
	must(t, "another account's order", other.Get("/sandbox/orders/"+o.ID), http.StatusNotFound, "Page not found")
	if strings.Contains(other.Get("/sandbox/orders").Body, o.ID) {
		t.Error("another account lists the order")
	}

	// Live: not enabled for a signed-up account.
	must(t, "live overview", u.Get("/live/"), http.StatusOK, "Live is not enabled for this account yet: <a href=\"/live/access\">request live access</a>", "0.00 EUR", "sk_live_...")
	must(t, "live key refused", u.Post("/live/keys", url.Values{"name": {"prod"}}), http.StatusForbidden, "once live is enabled")
	must(t, "live balance", u.Get("/live/balance"), http.StatusOK, "0.00 EUR", "No movements yet")
	if strings.Contains(u.Get("/live/balance").Body, "topup") {
		t.Error("the live balance page offers a top-up")
	}
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req, _ := http.NewRequest(method, p.URL+"/live/balance/topup", strings.NewReader("amount=10"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if res := u.Do(req); res.Status != http.StatusNotFound {
			t.Errorf("%s /live/balance/topup: %d", method, res.Status)
		}
	}
	must(t, "live balance unchanged", u.Get("/live/balance"), http.StatusOK, "0.00 EUR")

	// Keys: listed with prefix, name and time; revoked through the portal,
	// the key stops working on the API.
	keys := u.Get("/sandbox/keys")
	must(t, "keys", keys, http.StatusOK, "booking server", secret[:len("sk_sandbox_")+4], "UTC", "Active")
	if strings.Contains(keys.Body, secret) {
		t.Error("the keys page shows the secret")
	}
	keyID := regexp.MustCompile(`/sandbox/keys/([0-9a-f-]{36})/revoke`).FindStringSubmatch(keys.Body)
	if keyID == nil {
		t.Fatalf("no revoke link:\n%s", keys.Body)
	}
	must(t, "revoke page", u.Get("/sandbox/keys/"+keyID[1]+"/revoke"), http.StatusOK, "booking server", "cannot be undone")
	must(t, "revoke in live", u.Get("/live/keys/"+keyID[1]+"/revoke"), http.StatusNotFound)
	must(t, "revoke another's", other.Post("/sandbox/keys/"+keyID[1]+"/revoke", nil), http.StatusNotFound)
	if status, _ := api(t, p, http.MethodGet, "/plans?limit=1", secret, ""); status != http.StatusOK {
		t.Fatalf("another account revoked the key: %d", status)
	}
	if res := u.Post("/sandbox/keys/"+keyID[1]+"/revoke", nil); res.Status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", res.Status, res.Body)
	}
	must(t, "keys after revoking", u.Get("/sandbox/keys?done=revoked"), http.StatusOK, "Revoked")
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _ := api(t, p, http.MethodGet, "/plans?limit=1", secret, "")
		if status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still answers %d after 5 s", status)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Webhooks: set, reveal, rotate, test; the test event and its attempt.
	must(t, "webhooks without an endpoint", u.Get("/sandbox/webhooks"), http.StatusOK, "No endpoint set", `for="url"`)
	must(t, "test event without an endpoint", u.Post("/sandbox/webhooks/test", nil), http.StatusConflict, "Set an endpoint URL first")
	must(t, "a bad URL", u.Post("/sandbox/webhooks", url.Values{"url": {"ftp://x"}}), http.StatusBadRequest, "URL ")
	receiver := webhooktest.NewReceiver(t)
	if res := u.Post("/sandbox/webhooks", url.Values{"url": {receiver.URL}}); res.Status != http.StatusSeeOther {
		t.Fatalf("set endpoint: %d %s", res.Status, res.Body)
	}
	page := u.Get("/sandbox/webhooks?done=saved")
	must(t, "webhooks", page, http.StatusOK, receiver.URL, "Endpoint saved", "Reveal signing secret")
	if strings.Contains(page.Body, "whsec_") {
		t.Error("the secret shows before it is asked for")
	}
	revealed := u.Post("/sandbox/webhooks/secret", nil)
	must(t, "reveal", revealed, http.StatusOK, "whsec_")
	hookSecret := secretField.FindStringSubmatch(revealed.Body)
	if res := u.Post("/sandbox/webhooks/rotate", nil); res.Status != http.StatusSeeOther {
		t.Fatalf("rotate: %d", res.Status)
	}
	must(t, "rotated", u.Get("/sandbox/webhooks?done=rotated"), http.StatusOK, "rotated", "previous secret keeps signing")
	if again := secretField.FindStringSubmatch(u.Post("/sandbox/webhooks/secret", nil).Body); hookSecret == nil || again == nil || again[1] == hookSecret[1] {
		t.Error("the secret did not change on rotation")
	}
	if res := u.Post("/sandbox/webhooks/test", nil); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/events?done=test" {
		t.Fatalf("test event: %d %s", res.Status, res.Location())
	}
	must(t, "test event sent", u.Get("/sandbox/events?done=test"), http.StatusOK, `<p class="notice" role="status">Test event sent`)
	receiver.Wait(t, 1, 10*time.Second)
	var eventID string
	deadline = time.Now().Add(10 * time.Second)
	for {
		events := u.Get("/sandbox/events?type=ping&status=delivered")
		if m := regexp.MustCompile(`/sandbox/events/(evt_[0-9a-f]+)`).FindStringSubmatch(events.Body); m != nil {
			eventID = m[1]
			must(t, "events", events, http.StatusOK, "ping", "delivered")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivered ping listed:\n%s", events.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	must(t, "event", u.Get("/sandbox/events/"+eventID), http.StatusOK, "Attempt 1", "200", "ms", "UTC", "Request body", eventID)
	must(t, "the event in live", u.Get("/live/events/"+eventID), http.StatusNotFound)
	must(t, "another account's event", other.Get("/sandbox/events/"+eventID), http.StatusNotFound)
	must(t, "a bad status filter", u.Get("/sandbox/events?status=lost"), http.StatusBadRequest)
	must(t, "a bad page", u.Get("/sandbox/orders?page=0"), http.StatusBadRequest)
	must(t, "live events", u.Get("/live/events"), http.StatusOK, "No events")
	must(t, "settings", u.Get("/settings/password"), http.StatusOK, `for="current_password"`, `for="new_password"`)
	must(t, "unknown page", u.Get("/sandbox/nothing"), http.StatusNotFound, "Page not found")
	must(t, "stylesheet", u.Get("/static/portal.css"), http.StatusOK, "@media")
	must(t, "script", u.Get("/static/copy.js"), http.StatusOK, "clipboard")

	if res := u.Get("/"); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/" {
		t.Errorf("/ signed in: %d %s", res.Status, res.Location())
	}
	// Signed out, every page sends to sign in, and back afterwards.
	anon := p.NewBrowser()
	if res := anon.Get("/"); res.Status != http.StatusSeeOther || res.Location() != "/signin" {
		t.Errorf("/ signed out: %d %s", res.Status, res.Location())
	}
	for _, path := range []string{"/sandbox/", "/live/", "/sandbox/keys", "/sandbox/keys/" + keyID[1] + "/revoke", "/sandbox/webhooks", "/sandbox/events",
		"/sandbox/events/" + eventID, "/sandbox/orders?status=completed", "/sandbox/orders/" + o.ID, "/sandbox/balance", "/live/balance", "/settings/password"} {
		res := anon.Get(path)
		if res.Status != http.StatusSeeOther || res.Location() != "/signin?next="+url.QueryEscape(path) {
			t.Errorf("%s signed out: %d %s", path, res.Status, res.Location())
		}
	}
	for _, path := range []string{"/sandbox/keys", "/sandbox/balance/topup", "/sandbox/webhooks/test", "/signout"} {
		if res := anon.Post(path, url.Values{"name": {"x"}, "amount": {"1"}}); res.Status != http.StatusSeeOther || !strings.HasPrefix(res.Location(), "/signin?next=") {
			t.Errorf("POST %s signed out: %d %s", path, res.Status, res.Location())
		}
	}
	// The sign-in page brings the user back where they were going.
	b := p.NewBrowser()
	must(t, "sign in page", b.Get("/signin?next=%2Fsandbox%2Forders"), http.StatusOK, `value="/sandbox/orders"`, `for="email"`, `for="password"`)
	if res := b.Post("/signin", url.Values{"email": {u.Email}, "password": {u.Password}, "next": {"/sandbox/orders"}}); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/orders" {
		t.Errorf("sign in with next: %d %s", res.Status, res.Location())
	}
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"} {
		if res := p.NewBrowser().Post("/signin", url.Values{"email": {u.Email}, "password": {u.Password}, "next": {next}}); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/" {
			t.Errorf("sign in with next %q: %d %s", next, res.Status, res.Location())
		}
	}
}

func TestSessionCookie(t *testing.T) {
	p := portaltest.Start(t)
	u := p.SignUp("", "USD")
	c := u.SessionCookie()
	res := p.NewBrowser().Post("/signin", url.Values{"email": {u.Email}, "password": {u.Password}})
	raw := strings.Join(res.Header.Values("Set-Cookie"), "\n")
	for _, want := range []string{"esim_session=", "Path=/", "HttpOnly", "SameSite=Lax", "Max-Age="} {
		if !strings.Contains(raw, want) {
			t.Errorf("Set-Cookie %q lacks %s", raw, want)
		}
	}
	if strings.Contains(raw, "Secure") {
		t.Errorf("Set-Cookie %q is Secure with SECURE_COOKIES=false", raw)
	}
	if c.Value == "" {
		t.Fatal("no session")
	}

	// Sign-out ends the session: the old cookie, replayed, stops working.
	if res := u.Post("/signout", nil); res.Status != http.StatusSeeOther || res.Location() != "/signin" {
		t.Fatalf("sign out: %d %s", res.Status, res.Location())
	}
	replay := p.NewBrowser()
	replay.SetSessionCookie(&http.Cookie{Name: c.Name, Value: c.Value, Path: "/"})
	if res := replay.Get("/sandbox/"); res.Status != http.StatusSeeOther || !strings.HasPrefix(res.Location(), "/signin") {
		t.Errorf("a signed-out session: %d %s", res.Status, res.Location())
	} else if !strings.Contains(strings.Join(res.Header.Values("Set-Cookie"), ""), "Max-Age=0") {
		t.Errorf("a dead session's cookie is not cleared: %v", res.Header.Values("Set-Cookie"))
	}

	// A password change signs every other session out, not this one.
	first := p.SignIn(u.Email, u.Password)
	second := p.SignIn(u.Email, u.Password)
	must(t, "wrong current password", first.Post("/settings/password", url.Values{"current_password": {"nope nope nope"}, "new_password": {"a whole new password"}}),
		http.StatusBadRequest, "Current password is incorrect.")
	must(t, "short new password", first.Post("/settings/password", url.Values{"current_password": {u.Password}, "new_password": {"x"}}),
		http.StatusBadRequest, "New password must be at least")
	if res := first.Post("/settings/password", url.Values{"current_password": {u.Password}, "new_password": {"a whole new password"}}); res.Status != http.StatusSeeOther {
		t.Fatalf("change password: %d %s", res.Status, res.Body)
	}
	must(t, "after the change", first.Get("/settings/password?done=1"), http.StatusOK, "every other session was signed out")
	if res := second.Get("/sandbox/"); res.Status != http.StatusSeeOther {
		t.Errorf("another session after a password change: %d", res.Status)
	}
	p.SignIn(u.Email, "a whole new password")

	// An invitation joins the inviting account, signed in.
	invitee := portaltest.UniqueEmail("invitee")
	inv, err := p.Accounts.InviteUser(context.Background(), &accountsv1.InviteUserRequest{AccountId: u.AccountID, Email: invitee})
	if err != nil {
		t.Fatal(err)
	}
	b := p.NewBrowser()
	must(t, "invite page", b.Get("/invite/"+inv.GetToken()), http.StatusOK, `for="password"`)
	must(t, "invite with a short password", b.Post("/invite/"+inv.GetToken(), url.Values{"password": {"x"}}), http.StatusBadRequest, "Password must be at least")
	if res := b.Post("/invite/"+inv.GetToken(), url.Values{"password": {portaltest.Password}}); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/" {
		t.Fatalf("accept invite: %d %s %s", res.Status, res.Location(), res.Body)
	}
	if got := p.AccountOf(b); got != u.AccountID {
		t.Errorf("the invitee joined %s, want %s", got, u.AccountID)
	}
	must(t, "invite used again", p.NewBrowser().Post("/invite/"+inv.GetToken(), url.Values{"password": {portaltest.Password}}), http.StatusNotFound, "This invitation is not valid")
	p.SignIn(invitee, portaltest.Password)
}

func TestSignInAnswers(t *testing.T) {
	p := portaltest.Start(t)
	email := portaltest.UniqueEmail("guess")
	signIn := func(email, password string) portaltest.Response {
		return p.NewBrowser().Post("/signin", url.Values{"email": {email}, "password": {password}, "next": {"/sandbox/"}})
	}
	requestID := regexp.MustCompile(`req_[0-9a-f]+`)
	// Before the email has an account, and after, with a wrong password:
	// the same answer, byte for byte.
	unknown := signIn(email, "some password")
	u := &portaltest.User{Browser: p.NewBrowser()}
	if res := u.Post("/signup", url.Values{"email": {email}, "password": {portaltest.Password}, "account_name": {"Guess Co"}, "currency": {"GBP"}}); res.Status != http.StatusSeeOther {
		t.Fatalf("sign up: %d %s", res.Status, res.Body)
	}
	wrong := signIn(email, "some password")
	must(t, "unknown email", unknown, http.StatusUnauthorized, "Email or password is incorrect.")
	if unknown.Status != wrong.Status || requestID.ReplaceAllString(unknown.Body, "") != requestID.ReplaceAllString(wrong.Body, "") {
		t.Errorf("unknown email and wrong password answer differently:\n%d %s\n%d %s", unknown.Status, unknown.Body, wrong.Status, wrong.Body)
	}
	if len(unknown.Header.Values("Set-Cookie")) != 0 {
		t.Error("a failed sign-in set a cookie")
	}

	// The email has had 2 attempts; 3 more are allowed, the 6th is refused
	// without asking accounts: even the right password then fails.
	for i := 3; i <= 5; i++ {
		must(t, "attempt", signIn(email, "still wrong"), http.StatusUnauthorized)
	}
	limited := signIn(email, portaltest.Password)
	must(t, "the 6th attempt", limited, http.StatusTooManyRequests, "Too many sign-in attempts; try again in 15 minutes")
	if limited.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	// The same email in another case is the same email.
	must(t, "the same email in capitals", signIn(strings.ToUpper(email), portaltest.Password), http.StatusTooManyRequests)
	// Other emails from the same address are still let through.
	p.SignUp("", "USD")

	// A cross-site form post is refused and changes nothing.
	owner := p.SignUp("Cross Co", "USD")
	for _, path := range []string{"/sandbox/keys", "/signout", "/sandbox/balance/topup", "/settings/password"} {
		req, _ := http.NewRequest(http.MethodPost, p.URL+path, strings.NewReader(url.Values{"name": {"evil"}, "amount": {"1000"}, "current_password": {portaltest.Password}, "new_password": {"owned by evil"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if res := owner.Do(req); res.Status != http.StatusForbidden {
			t.Errorf("cross-site POST %s: %d", path, res.Status)
		}
	}
	must(t, "keys after the cross-site post", owner.Get("/sandbox/keys"), http.StatusOK, "No sandbox keys yet")
	must(t, "balance after the cross-site post", owner.Get("/sandbox/balance"), http.StatusOK, "0.00 USD", "No movements yet")
	p.SignIn(owner.Email, portaltest.Password)

	// Sign-up errors name the field.
	must(t, "email taken", p.NewBrowser().Post("/signup", url.Values{"email": {email}, "password": {portaltest.Password}, "account_name": {"X"}, "currency": {"USD"}}),
		http.StatusBadRequest, "already uses this email")
	must(t, "short password", p.NewBrowser().Post("/signup", url.Values{"email": {portaltest.UniqueEmail("p")}, "password": {"x"}, "account_name": {"X"}, "currency": {"USD"}}),
		http.StatusBadRequest, "Password must be at least", `aria-invalid="true"`)
	must(t, "bad currency", p.NewBrowser().Post("/signup", url.Values{"email": {portaltest.UniqueEmail("p")}, "password": {portaltest.Password}, "account_name": {"X"}, "currency": {"JPY"}}),
		http.StatusBadRequest, "Currency must be one of")
	must(t, "sign up page", p.NewBrowser().Get("/signup"), http.StatusOK, `for="account_name"`, `<option value="GBP"`)
}

func TestAccountNameIsEscaped(t *testing.T) {
	p := portaltest.Start(t)
	const name = `<script>alert(1)</script>`
	u := p.SignUp(name, "USD")
	for _, path := range []string{"/sandbox/", "/live/", "/sandbox/keys", "/sandbox/webhooks", "/sandbox/events", "/sandbox/orders", "/sandbox/balance", "/settings/password", "/sandbox/nothing"} {
		res := u.Get(path)
		if strings.Contains(res.Body, "<script>alert") || strings.Contains(res.Body, "alert(1)</script>") {
			t.Errorf("%s renders the account name unescaped", path)
		}
		if res.Status == http.StatusOK && !strings.Contains(res.Body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the account name", path)
		}
	}
	// The portal is ready while Redis answers.
	resp, err := http.Get(p.URL + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("readyz: %v %v", resp, err)
	}
}

// Parallel wrong passwords are stopped at the limit exactly: each attempt
// is claimed before accounts is asked, so no number of them racing
// through a check gets more than the limit's guesses. Sign-ins that
// succeed give their attempt back.
func TestParallelSignInsStopAtTheLimit(t *testing.T) {
	const limit, attempts = 5, 16
	p := portaltest.StartWith(t, portaltest.Options{SignInLimitPerEmail: limit})
	u := p.SignUp("", "USD")
	addr := portaltest.RandomLoopback()
	signIn := func(password string) portaltest.Response {
		return p.NewBrowserFrom(addr).Post("/signin", url.Values{"email": {u.Email}, "password": {password}})
	}
	// More successes than the limit, one after another: none counts.
	for i := range limit + 2 {
		if res := signIn(u.Password); res.Status != http.StatusSeeOther {
			t.Fatalf("sign-in %d with the right password: %d", i+1, res.Status)
		}
	}

	statuses := make([]int, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() { statuses[i] = signIn("wrong password " + strconv.Itoa(i)).Status })
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[http.StatusUnauthorized] != limit || count[http.StatusTooManyRequests] != attempts-limit {
		t.Fatalf("%d parallel wrong passwords against a limit of %d: %v, want %d × 401 and %d × 429",
			attempts, limit, count, limit, attempts-limit)
	}
	// At the limit, even the right password is refused, and no session
	// is made.
	b := p.NewBrowserFrom(addr)
	res := b.Post("/signin", url.Values{"email": {u.Email}, "password": {u.Password}})
	must(t, "the right password at the limit", res, http.StatusTooManyRequests, "Too many sign-in attempts")
	if b.SessionCookie() != nil {
		t.Error("a session at the limit")
	}
}

// Sign-ups and invite acceptances share a per-address limit; every
// attempt counts, and over it accounts is not asked: no account, no user.
func TestSignUpsAndInvitesArePerAddressLimited(t *testing.T) {
	const limit = 3
	p := portaltest.StartWith(t, portaltest.Options{SignUpLimitPerAddress: limit})
	owner, err := p.Accounts.CreateAccount(context.Background(), &accountsv1.CreateAccountRequest{Name: "Inviting Co", Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	addr := portaltest.RandomLoopback()
	signUp := func(email, password string) portaltest.Response {
		return p.NewBrowserFrom(addr).Post("/signup", url.Values{"email": {email}, "password": {password}, "account_name": {"Limited Co"}, "currency": {"USD"}})
	}
	// A failed attempt counts as a successful one does.
	must(t, "a short password", signUp(portaltest.UniqueEmail("limited"), "x"), http.StatusBadRequest, "Password must be at least")
	if res := signUp(portaltest.UniqueEmail("limited"), portaltest.Password); res.Status != http.StatusSeeOther {
		t.Fatalf("sign-up 2: %d %s", res.Status, res.Body)
	}
	inv, err := p.Accounts.InviteUser(context.Background(), &accountsv1.InviteUserRequest{AccountId: owner.GetId(), Email: portaltest.UniqueEmail("invitee")})
	if err != nil {
		t.Fatal(err)
	}
	must(t, "an invite with a short password", p.NewBrowserFrom(addr).Post("/invite/"+inv.GetToken(), url.Values{"password": {"x"}}),
		http.StatusBadRequest, "Password must be at least")

	// The limit is reached: a sign-up and the invite, valid, are refused.
	late := portaltest.UniqueEmail("late")
	res := signUp(late, portaltest.Password)
	must(t, "a sign-up over the limit", res, http.StatusTooManyRequests, "Too many attempts from your address; try again in 60 minutes", late)
	if res.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	b := p.NewBrowserFrom(addr)
	must(t, "an invite over the limit", b.Post("/invite/"+inv.GetToken(), url.Values{"password": {portaltest.Password}}),
		http.StatusTooManyRequests, "Too many attempts from your address")
	if b.SessionCookie() != nil {
		t.Error("a session over the limit")
	}
	// Neither reached accounts: the email has no user, the invite is
	// still unused.
	if res := p.NewBrowser().Post("/signin", url.Values{"email": {late}, "password": {portaltest.Password}}); res.Status != http.StatusUnauthorized {
		t.Errorf("the refused sign-up's email signs in: %d", res.Status)
	}
	other := p.NewBrowserFrom(portaltest.RandomLoopback())
	if res := other.Post("/invite/"+inv.GetToken(), url.Values{"password": {portaltest.Password}}); res.Status != http.StatusSeeOther {
		t.Errorf("the invite from another address after the refusal: %d %s", res.Status, res.Body)
	}
	// Other addresses are not limited by this one.
	if res := p.NewBrowserFrom(portaltest.RandomLoopback()).Post("/signup", url.Values{"email": {portaltest.UniqueEmail("else")}, "password": {portaltest.Password}, "account_name": {"Else"}, "currency": {"USD"}}); res.Status != http.StatusSeeOther {
		t.Errorf("a sign-up from another address: %d", res.Status)
	}
}

// A new key's secret is on a page of its own, reached by a redirect after
// the form's POST and shown once: a reload shows no secret and makes no
// key. Meanwhile Redis holds it sealed, for two minutes at most, and only
// the browser that made it holds what opens it.
func TestNewKeyIsShownOnce(t *testing.T) {
	ctx := context.Background()
	p := portaltest.Start(t)
	u := p.SignUp("Once Co", "USD")
	rdb, err := redis.Connect(portaltest.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })

	created := u.Post("/sandbox/keys", url.Values{"name": {"once"}})
	page := created.Location()
	if created.Status != http.StatusSeeOther || !newKeyPage.MatchString(page) {
		t.Fatalf("create key: %d %s, want 303 to its page", created.Status, page)
	}
	if strings.Contains(created.Body, "sk_sandbox_") {
		t.Error("the POST's answer holds the secret")
	}
	raw := strings.Join(created.Header.Values("Set-Cookie"), "\n")
	for _, want := range []string{web.NewKeyCookie + "=", "Path=" + page + ";", "HttpOnly", "SameSite=Strict", "Max-Age=120"} {
		if !strings.Contains(raw+";", want) {
			t.Errorf("Set-Cookie %q lacks %s", raw, want)
		}
	}
	id := page[strings.LastIndexByte(page, '/')+1:]
	sealed, err := rdb.Get(ctx, redis.NewKeyKey(id)).Bytes()
	if err != nil {
		t.Fatalf("nothing kept in Redis for %s: %v", id, err)
	}
	if ttl := rdb.PTTL(ctx, redis.NewKeyKey(id)).Val(); ttl <= 0 || ttl > 2*time.Minute {
		t.Errorf("the sealed key expires in %s, want within 2 minutes", ttl)
	}

	// Another browser of the same user, without the cookie: no secret,
	// and the secret still waits for its own browser.
	other := p.SignIn(u.Email, u.Password)
	if res := other.Get(page); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/keys?done=shown" {
		t.Errorf("the page without its cookie: %d %s", res.Status, res.Location())
	}

	res := u.Get(page)
	must(t, "the new key's page", res, http.StatusOK, "shown only once", "once")
	m := secretField.FindStringSubmatch(res.Body)
	if m == nil || !strings.HasPrefix(m[1], "sk_sandbox_") {
		t.Fatalf("no secret on the page:\n%s", res.Body)
	}
	secret := m[1]
	if strings.Contains(string(sealed), secret) || strings.Contains(string(sealed), "sk_sandbox_") {
		t.Error("Redis held the secret readable")
	}
	if status, body := api(t, p, http.MethodGet, "/plans?limit=1", secret, ""); status != http.StatusOK {
		t.Fatalf("the shown key on the API: %d %s", status, body)
	}
	if n := rdb.Exists(ctx, redis.NewKeyKey(id)).Val(); n != 0 {
		t.Error("the sealed key is still in Redis after it was shown")
	}
	if !strings.Contains(strings.Join(res.Header.Values("Set-Cookie"), ""), "Max-Age=0") {
		t.Errorf("the page does not clear its cookie: %v", res.Header.Values("Set-Cookie"))
	}

	// A reload, and a replay of the cookie: no secret, no new key.
	reload := u.Get(page)
	if reload.Status != http.StatusSeeOther || reload.Location() != "/sandbox/keys?done=shown" || strings.Contains(reload.Body, "sk_sandbox_") {
		t.Errorf("the page reloaded: %d %s", reload.Status, reload.Location())
	}
	replay := p.SignIn(u.Email, u.Password)
	replay.Client.Jar.SetCookies(mustURL(t, p.URL+page), []*http.Cookie{{Name: web.NewKeyCookie, Value: cookieValue(raw), Path: page}})
	if res := replay.Get(page); res.Status != http.StatusSeeOther || strings.Contains(res.Body, "sk_sandbox_") {
		t.Errorf("the cookie replayed: %d %s", res.Status, res.Body)
	}
	keys := u.Get("/sandbox/keys?done=shown")
	must(t, "keys after the reload", keys, http.StatusOK, "shown only once", secret[:len("sk_sandbox_")+4])
	if n := strings.Count(keys.Body, "/revoke\""); n != 1 || strings.Contains(keys.Body, secret) {
		t.Errorf("the keys page lists %d keys after one creation and a reload, or shows the secret", n)
	}

	// Another account's session, even with the cookie, opens nothing.
	created = u.Post("/sandbox/keys", url.Values{"name": {"second"}})
	page = created.Location()
	thief := p.SignUp("Thief Co", "USD")
	thief.Client.Jar.SetCookies(mustURL(t, p.URL+page), []*http.Cookie{{Name: web.NewKeyCookie, Value: cookieValue(strings.Join(created.Header.Values("Set-Cookie"), "\n")), Path: page}})
	if res := thief.Get(page); res.Status != http.StatusSeeOther || strings.Contains(res.Body, "sk_sandbox_") {
		t.Errorf("another account with the cookie: %d\n%s", res.Status, res.Body)
	}
	must(t, "a malformed new key id", u.Get("/sandbox/new-key/nope"), http.StatusNotFound)
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// cookieValue is the new key cookie's value in Set-Cookie lines.
func cookieValue(setCookie string) string {
	m := regexp.MustCompile(web.NewKeyCookie + `=([^;]+)`).FindStringSubmatch(setCookie)
	if m == nil {
		return ""
	}
	return m[1]
}
