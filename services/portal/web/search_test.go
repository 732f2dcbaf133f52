package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/portal/portaltest"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// The search box finds a partner's own orders, eSIMs and events, in the
// page's environment only, and the pages around them tell the truth at a
// glance: plan names, customers, readable words, grouped amounts, links
// from the ledger to what each entry paid for and from an order to its
// events, a pager past the last page, the navigation on error and
// settings pages, and a confirmation before a rotation cuts an overlap
// short.
func TestSearchAndTruthfulPages(t *testing.T) {
	p := portaltest.Start(t)
	u := p.SignUp("Search Travel", "EUR")
	other := p.SignUp("Other Travel", "EUR")
	for range 2 {
		if res := u.Post("/sandbox/balance/topup", url.Values{"amount": {"1000"}}); res.Status != http.StatusSeeOther {
			t.Fatalf("top-up: %d", res.Status)
		}
	}
	key := createKey(t, u, "sandbox", "search")
	mia := orderFor(t, p, key, 2, `{"name": "Mia Rossi", "email": "mia.rossi@example.com", "reference": "BK-2041"}`)
	orderFor(t, p, key, 1, `{"email": "noah@example.org", "reference": "BK-3310"}`)
	_, planName := firstFixedPlan(t, p, key)

	// Orders: plan names, customers, readable statuses, grouped amounts.
	must(t, "orders", u.Get("/sandbox/orders"), http.StatusOK, planName, "Mia Rossi", "mia.rossi@example.com", "BK-2041",
		`<span class="status status-completed">Completed</span>`, `<option value="completed">Completed</option>`)
	must(t, "balance", u.Get("/sandbox/balance"), http.StatusOK, "EUR</p>", `<span class="status status-top_up">Top-up</span>`,
		`<span class="status status-debit">Debit</span>`, "+1,000.00 EUR", `<a href="/sandbox/orders/`+mia.ID+`">`)

	// By email (its start, another case), by reference, by ICCID, by id.
	found := u.Get("/sandbox/search?q=" + url.QueryEscape("MIA.R"))
	must(t, "by email", found, http.StatusOK, `href="/sandbox/orders/`+mia.ID+`"`, "Orders (1)", `value="MIA.R"`)
	must(t, "by reference", u.Get("/sandbox/search?q=BK-"), http.StatusOK, "Orders (2)")
	must(t, "by ICCID", u.Get("/sandbox/search?q="+mia.Esims[0].ICCID[:len(mia.Esims[0].ICCID)-1]), http.StatusOK,
		"eSIMs (1)", `href="/sandbox/esims/`+mia.Esims[0].ID+`"`)
	must(t, "by eSIM id", u.Get("/sandbox/search?q="+mia.Esims[1].ID), http.StatusOK, "eSIMs (1)", `href="/sandbox/esims/`+mia.Esims[1].ID+`"`)
	byOrder := u.Get("/sandbox/search?q=" + mia.ID)
	must(t, "by order id", byOrder, http.StatusOK, "Orders (1)", `id="events-found"`, "order.completed",
		`href="/sandbox/events?order=`+mia.ID+`"`)
	evt := regexp.MustCompile(`href="/sandbox/events/(evt_[0-9a-f]{32})"`).FindStringSubmatch(byOrder.Body)
	if evt == nil {
		t.Fatalf("no event of the order found by its id:\n%s", byOrder.Body)
	}
	must(t, "by event id", u.Get("/sandbox/search?q="+evt[1]), http.StatusOK, `href="/sandbox/events/`+evt[1]+`"`)
	must(t, "nothing", u.Get("/sandbox/search?q=zzz"), http.StatusOK, "Nothing in sandbox matches")
	must(t, "no query", u.Get("/sandbox/search"), http.StatusOK, "Search this environment")
	must(t, "too long", u.Get("/sandbox/search?q="+strings.Repeat("a", 300)), http.StatusBadRequest, "at most 254")
	// Another account's, or the other environment's: nothing.
	for _, q := range []string{mia.ID, mia.Esims[0].ICCID, "mia.rossi", "BK-2041", evt[1]} {
		must(t, "another account's search", other.Get("/sandbox/search?q="+url.QueryEscape(q)), http.StatusOK, "Nothing in sandbox matches")
		must(t, "the live search", u.Get("/live/search?q="+url.QueryEscape(q)), http.StatusOK, "Nothing in live matches")
	}

	// An order links its events; the events of an order, and only them.
	must(t, "order", u.Get("/sandbox/orders/"+mia.ID), http.StatusOK, planName, `href="/sandbox/events?order=`+mia.ID+`"`)
	must(t, "its events", u.Get("/sandbox/events?order="+mia.ID), http.StatusOK, `href="/sandbox/events/`+evt[1]+`"`,
		`<input type="hidden" name="order" value="`+mia.ID+`">`)
	must(t, "a bad order filter", u.Get("/sandbox/events?order=nope"), http.StatusBadRequest)

	// A top-up's ledger entry leads to its eSIM's page.
	sim := mia.Esims[0]
	planID, _ := firstFixedPlan(t, p, key)
	top, err := orderingtest.Client(p.OrderingURL, internalauth.Gateway).CreateTopUp(context.Background(), &orderingv1.CreateTopUpRequest{
		Scope: &orderingv1.Scope{AccountId: u.AccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}, Currency: "EUR", IdempotencyKey: "search-topup", EsimId: sim.ID, PlanId: planID,
	})
	if err != nil {
		t.Fatal(err)
	}
	topID := top.GetTopup().GetId()
	must(t, "the top-up in the ledger", u.Get("/sandbox/balance"), http.StatusOK, `<a href="/sandbox/orders/`+topID+`">`)
	if res := u.Get("/sandbox/orders/" + topID); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/esims/"+sim.ID+"#topup-"+topID {
		t.Errorf("a top-up's page: %d %s, want 303 to its eSIM's", res.Status, res.Location())
	}
	must(t, "the top-up on its eSIM", u.Get("/sandbox/esims/"+sim.ID), http.StatusOK, `<tr id="topup-`+topID+`">`)
	must(t, "the top-up by its id", u.Get("/sandbox/search?q="+topID), http.StatusOK, "Top-ups (1)", `href="/sandbox/esims/`+sim.ID+`#topup-`+topID+`"`)
	must(t, "another's top-up", other.Get("/sandbox/orders/"+topID), http.StatusNotFound)

	// A page past the last shows the pager, leading back.
	must(t, "past the last page", u.Get("/sandbox/orders?page=7"), http.StatusOK, "No orders on this page", "Page 7 of 1 (2 in all)",
		`<a href="/sandbox/orders?page=1">Last page</a>`)
	must(t, "past the last events", u.Get("/sandbox/events?page=9"), http.StatusOK, "Page 9 of 1", "Last page")

	// The navigation stays on error and settings pages.
	nav := `<nav class="sections" aria-label="Sections">`
	must(t, "a missing order", u.Get("/sandbox/orders/00000000-0000-7000-8000-000000000000"), http.StatusNotFound, nav, `href="/sandbox/orders"`, `id="site-search"`)
	must(t, "an unknown live page", u.Get("/live/nowhere"), http.StatusNotFound, nav, `href="/live/orders"`)
	must(t, "a bad page number", u.Get("/live/orders?page=x"), http.StatusBadRequest, nav, `href="/live/orders"`)
	must(t, "settings", u.Get("/settings/password"), http.StatusOK, nav, `href="/settings/password" aria-current="page"`)
	if res := p.NewBrowser().Get("/nowhere"); res.Status != http.StatusNotFound || strings.Contains(res.Body, nav) {
		t.Errorf("a signed-out 404: %d, with the navigation: %v", res.Status, strings.Contains(res.Body, nav))
	}

	// Rotating in the overlap window asks first; rotating anyway works.
	receiver := webhooktest.NewReceiver(t)
	if res := u.Post("/sandbox/webhooks", url.Values{"url": {receiver.URL}}); res.Status != http.StatusSeeOther {
		t.Fatalf("set endpoint: %d", res.Status)
	}
	if res := u.Post("/sandbox/webhooks/rotate", nil); res.Status != http.StatusSeeOther {
		t.Fatalf("first rotation: %d", res.Status)
	}
	endpoint, err := p.Webhook.GetEndpoint(context.Background(), endpointOf(u))
	if err != nil {
		t.Fatal(err)
	}
	must(t, "second rotation", u.Post("/sandbox/webhooks/rotate", nil), http.StatusOK, "already in its overlap window",
		`<input type="hidden" name="confirm" value="yes">`, "Rotate anyway")
	if again, _ := p.Webhook.GetEndpoint(context.Background(), endpointOf(u)); again.GetSecretCreatedAt().AsTime() != endpoint.GetSecretCreatedAt().AsTime() {
		t.Error("the secret was rotated without confirmation")
	}
	if res := u.Post("/sandbox/webhooks/rotate", url.Values{"confirm": {"yes"}}); res.Status != http.StatusSeeOther || res.Location() != "/sandbox/webhooks?done=rotated" {
		t.Errorf("confirmed rotation: %d %s", res.Status, res.Location())
	}
	if again, _ := p.Webhook.GetEndpoint(context.Background(), endpointOf(u)); again.GetSecretCreatedAt().AsTime() == endpoint.GetSecretCreatedAt().AsTime() {
		t.Error("the confirmed rotation did not rotate")
	}
}
