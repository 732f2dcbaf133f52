package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/portal/portaltest"
	"github.com/esimplatform/esim/services/portal/server"
	"github.com/esimplatform/esim/services/portal/web"
)

// plan is a plan as the API lists it.
type plan struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Data struct {
		Unlimited  bool  `json:"unlimited"`
		TotalBytes int64 `json:"total_bytes"`
	} `json:"data"`
	ValidityDays int `json:"validity_days"`
}

// orderedEsim is an eSIM as the API's order answer shows it.
type orderedEsim struct {
	ID    string `json:"id"`
	ICCID string `json:"iccid"`
}

// orderEsims orders quantity eSIMs of the first plan of type (fixed or
// per_day) with key, and returns the plan, the order's id and its eSIMs.
func orderEsims(t *testing.T, p *portaltest.Platform, key, typ string, quantity int) (plan, string, []orderedEsim) {
	t.Helper()
	status, body := api(t, p, http.MethodGet, "/plans?type="+typ+"&limit=1", key, "")
	var plans struct {
		Data []plan `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &plans); status != http.StatusOK || err != nil || len(plans.Data) == 0 {
		t.Fatalf("plans: %d %v %s", status, err, body)
	}
	pl := plans.Data[0]
	status, body = api(t, p, http.MethodPost, "/orders", key, `{"plan_id": "`+pl.ID+`", "quantity": `+strconv.Itoa(quantity)+`}`)
	var order struct {
		Data struct {
			ID    string        `json:"id"`
			Esims []orderedEsim `json:"esims"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &order); status != http.StatusCreated || err != nil || len(order.Data.Esims) != quantity {
		t.Fatalf("order: %d %v %s", status, err, body)
	}
	return pl, order.Data.ID, order.Data.Esims
}

// waitFor fetches path until its page holds every one of wants.
func waitFor(t *testing.T, b *portaltest.User, path string, wants ...string) portaltest.Response {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res := b.Get(path)
		missing := ""
		for _, w := range wants {
			if !strings.Contains(res.Body, w) {
				missing = w
				break
			}
		}
		if res.Status == http.StatusOK && missing == "" {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, still without %q after 15 s\n%.3000s", path, res.Status, missing, res.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEsimPages(t *testing.T) {
	p := portaltest.Start(t)
	u := p.SignUp("Esim Travel", "EUR")
	must(t, "no eSIMs yet", u.Get("/sandbox/esims"), http.StatusOK, "No eSIMs yet", `aria-current="page">eSIMs</a>`, `for="iccid"`, `for="status"`)

	if res := u.Post("/sandbox/balance/topup", url.Values{"amount": {"500"}}); res.Status != http.StatusSeeOther {
		t.Fatalf("top-up: %d %s", res.Status, res.Body)
	}
	key := createKey(t, u, "sandbox", "eSIM pages")
	plan, orderID, esims := orderEsims(t, p, key, "fixed", 2)
	_, otherOrder, _ := orderEsims(t, p, key, "fixed", 1)

	// The list: every eSIM, newest first, each linked to its page.
	list := u.Get("/sandbox/esims")
	must(t, "eSIMs", list, http.StatusOK, "Page 1 of 1 (3 in all)", `<span class="status status-allocated">Allocated</span>`, "after activation",
		"0 bytes of "+web.ByteSize(plan.Data.TotalBytes), `href="/sandbox/orders/`+orderID+`"`)
	for _, e := range esims {
		must(t, "eSIMs", list, http.StatusOK, `<a href="/sandbox/esims/`+e.ID+`"><code class="id-full">`+e.ICCID+`</code>`, `data-copy-text="`+e.ICCID+`"`)
	}

	// Search by ICCID, pasted in groups of four.
	grouped := regexp.MustCompile(`(\d{4})`).ReplaceAllString(esims[1].ICCID, "$1 ")
	found := u.Get("/sandbox/esims?iccid=" + url.QueryEscape(grouped))
	must(t, "by ICCID", found, http.StatusOK, esims[1].ICCID, "Page 1 of 1 (1 in all)", `value="`+esims[1].ICCID+`"`)
	if strings.Contains(found.Body, esims[0].ICCID) {
		t.Error("the search by ICCID lists another eSIM")
	}
	must(t, "an unknown ICCID", u.Get("/sandbox/esims?iccid=8999999999999999999"), http.StatusOK, "No eSIMs match these filters")
	must(t, "an ICCID of letters", u.Get("/sandbox/esims?iccid=89abc"), http.StatusBadRequest, "digits only")
	must(t, "a too long ICCID", u.Get("/sandbox/esims?iccid="+strings.Repeat("8", 23)), http.StatusBadRequest, "digits only")
	must(t, "an unknown status", u.Get("/sandbox/esims?status=LOST"), http.StatusBadRequest, "ALLOCATED, INSTALLED, ACTIVE, DEPLETED or EXPIRED")
	must(t, "a status in lower case", u.Get("/sandbox/esims?status=allocated"), http.StatusOK, esims[0].ICCID, `<option value="ALLOCATED" selected>`)
	must(t, "a bad page", u.Get("/sandbox/esims?page=0"), http.StatusBadRequest, "page must be")
	must(t, "live eSIMs", u.Get("/live/esims"), http.StatusOK, "No eSIMs yet")

	// The eSIM's page: fresh from its order, ALLOCATED, nothing used, no
	// top-ups, and its order's completion among its events.
	path := "/sandbox/esims/" + esims[0].ID
	page := waitFor(t, u, path, "order.completed")
	must(t, "eSIM", page, http.StatusOK, "eSIM "+esims[0].ICCID, "status-allocated", "Issued", "Not yet", "To come:",
		`<meter id="usage" class="usage" min="0" max="`+strconv.FormatInt(plan.Data.TotalBytes, 10)+`" value="0"`,
		"<strong>0 bytes</strong> used of "+web.ByteSize(plan.Data.TotalBytes)+" (0%), <strong>"+web.ByteSize(plan.Data.TotalBytes)+"</strong> remaining",
		strconv.Itoa(plan.ValidityDays)+" days after activation", "No top-ups", `href="/sandbox/orders/`+orderID+`"`, "LPA:1$", `aria-current="page">eSIMs</a>`)
	events := regexp.MustCompile(`href="/sandbox/events/(evt_[0-9a-f]{32})"`).FindAllStringSubmatch(page.Body, -1)
	if len(events) != 1 {
		t.Fatalf("the eSIM's page lists %d events, want its order's completion only:\n%s", len(events), page.Body)
	}
	ev, err := p.Webhook.GetEvent(t.Context(), &webhookv1.GetEventRequest{Id: events[0][1]})
	if err != nil || ev.GetOrderId() != orderID || ev.GetType() != "order.completed" {
		t.Errorf("the event listed is %v (%v), want the order.completed of %s, not of %s", ev, err, orderID, otherOrder)
	}
	must(t, "the order links its eSIMs' pages", u.Get("/sandbox/orders/"+orderID), http.StatusOK, `href="/sandbox/esims/`+esims[0].ID+`"`, `href="/sandbox/esims/`+esims[1].ID+`"`)

	// Another account's, another environment's, a malformed and an
	// unknown eSIM are not found; signed out, the page asks to sign in.
	other := p.SignUp("Other Travel", "USD")
	must(t, "another account's eSIM", other.Get(path), http.StatusNotFound, "Page not found")
	if res := other.Get("/sandbox/esims?iccid=" + esims[0].ICCID); strings.Contains(res.Body, esims[0].ID) || res.Status != http.StatusOK {
		t.Errorf("another account finds the eSIM by its ICCID: %d", res.Status)
	}
	must(t, "the eSIM in live", u.Get("/live/esims/"+esims[0].ID), http.StatusNotFound, "Page not found")
	must(t, "a malformed id", u.Get("/sandbox/esims/nope"), http.StatusNotFound, "Page not found")
	must(t, "an unknown id", u.Get("/sandbox/esims/00000000-0000-7000-8000-000000000000"), http.StatusNotFound, "Page not found")

	// Pages of 20, newest first, the filters kept from page to page.
	orderEsims(t, p, key, "fixed", 19)
	rows := regexp.MustCompile(`<a href="/sandbox/esims/[0-9a-f-]{36}">`)
	first := u.Get("/sandbox/esims?status=ALLOCATED")
	must(t, "page 1", first, http.StatusOK, "Page 1 of 2 (22 in all)", `<a href="/sandbox/esims?page=2&amp;status=ALLOCATED" rel="next">Next</a>`)
	if n := len(rows.FindAllString(first.Body, -1)); n != 20 || strings.Contains(first.Body, esims[0].ID) {
		t.Errorf("page 1 lists %d eSIMs (want 20), or the oldest", n)
	}
	second := u.Get("/sandbox/esims?page=2&status=ALLOCATED")
	must(t, "page 2", second, http.StatusOK, "Page 2 of 2 (22 in all)", `<a href="/sandbox/esims?page=1&amp;status=ALLOCATED" rel="prev">Previous</a>`, esims[0].ID, esims[1].ID)
	if n := len(rows.FindAllString(second.Body, -1)); n != 2 || strings.Contains(second.Body, `rel="next"`) {
		t.Errorf("page 2 lists %d eSIMs (want 2), or links a next page", n)
	}

	anon := p.NewBrowser()
	for _, path := range []string{"/sandbox/esims", path} {
		if res := anon.Get(path); res.Status != http.StatusSeeOther || res.Location() != "/signin?next="+url.QueryEscape(path) {
			t.Errorf("%s signed out: %d %s", path, res.Status, res.Location())
		}
	}
}

// An eSIM's page follows it through its life as the sandbox moves it:
// installed, activated, 60 percent used, used up, topped up, expired;
// and the list's status filter finds it in each status.
func TestEsimPageFollowsItsLife(t *testing.T) {
	ctx := t.Context()
	p := portaltest.Start(t)
	u := p.SignUp("Lifecycle Travel", "EUR")
	if res := u.Post("/sandbox/balance/topup", url.Values{"amount": {"500"}}); res.Status != http.StatusSeeOther {
		t.Fatalf("top-up: %d %s", res.Status, res.Body)
	}
	key := createKey(t, u, "sandbox", "lifecycle")
	fixed, _, fixedEsims := orderEsims(t, p, key, "fixed", 2)
	_, _, dailyEsims := orderEsims(t, p, key, "per_day", 1)
	es, sibling, daily := fixedEsims[0], fixedEsims[1], dailyEsims[0]
	path := "/sandbox/esims/" + es.ID

	scope := &orderingv1.Scope{AccountId: u.AccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
	ordering := orderingtest.Client(p.OrderingURL, internalauth.Gateway)
	simulate := func(action string, bytes *int64, status string) *orderingv1.Esim {
		t.Helper()
		e, err := ordering.SimulateEsim(ctx, &orderingv1.SimulateEsimRequest{Scope: scope, EsimId: es.ID, Action: action, Bytes: bytes})
		if err != nil || e.GetStatus() != status {
			t.Fatalf("simulate %s: %v, %v; want %s", action, e.GetStatus(), err, status)
		}
		return e
	}
	utc := func(ts *timestamppb.Timestamp) string { return ts.AsTime().UTC().Format("2006-01-02 15:04:05 UTC") }
	// listed is what the eSIMs page lists with ?status=status.
	listed := func(status string) (ids []string) {
		t.Helper()
		res := u.Get("/sandbox/esims?status=" + status)
		must(t, "eSIMs "+status, res, http.StatusOK)
		for _, m := range regexp.MustCompile(`href="/sandbox/esims/([0-9a-f-]{36})"`).FindAllStringSubmatch(res.Body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	wantListed := func(status string, want ...string) {
		t.Helper()
		if got := listed(status); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("eSIMs %s: %v, want %v", status, got, want)
		}
	}

	installed := simulate("install", nil, "INSTALLED")
	must(t, "installed", u.Get(path), http.StatusOK, "status-installed", "<strong>Installed</strong> <time datetime=", utc(installed.GetInstalledAt()),
		"<strong>Activated</strong>\n", "Not yet: validity starts")
	wantListed("INSTALLED", es.ID)

	active := simulate("activate", nil, "ACTIVE")
	total := fixed.Data.TotalBytes
	used := (total*60 + 99) / 100
	simulate("consume", &used, "ACTIVE")
	must(t, "60 percent used", u.Get(path), http.StatusOK, "status-active", utc(active.GetActivatedAt()), utc(active.GetExpiresAt()),
		`max="`+strconv.FormatInt(total, 10)+`" value="`+strconv.FormatInt(used, 10)+`"`,
		"<strong>"+web.ByteSize(used)+"</strong> used of "+web.ByteSize(total)+" (60%), <strong>"+web.ByteSize(total-used)+"</strong> remaining",
		"<strong>Expires</strong> <time datetime=")
	wantListed("ACTIVE", es.ID)
	wantListed("ALLOCATED", daily.ID, sibling.ID)
	wantListed("EXPIRED")
	must(t, "no expired eSIMs", u.Get("/sandbox/esims?status=EXPIRED"), http.StatusOK, "No eSIMs match these filters")

	rest := total
	simulate("consume", &rest, "DEPLETED")
	// The moment it was used up is its 100 percent usage event's.
	must(t, "used up", waitFor(t, u, path, ">esim.usage 100%<"), http.StatusOK, "status-depleted",
		"<strong>Data used up</strong> <time datetime=", "(100%), <strong>0 bytes</strong> remaining")
	wantListed("DEPLETED", es.ID)

	// A top-up of the same plan revives it: twice the bytes, a row of its
	// own and a step of the timeline.
	res, err := ordering.CreateTopUp(ctx, &orderingv1.CreateTopUpRequest{Scope: scope, Currency: "EUR", IdempotencyKey: "more", EsimId: es.ID, PlanId: fixed.ID})
	if err != nil || res.GetTopup().GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
		t.Fatalf("CreateTopUp = %v, %v", res, err)
	}
	top := res.GetTopup()
	page := u.Get(path)
	must(t, "topped up", page, http.StatusOK, "status-active", `max="`+strconv.FormatInt(2*total, 10)+`"`,
		"<strong>Top-up</strong> <time datetime=", utc(top.GetCreatedAt()), `<span class="status status-completed">Completed</span>`,
		`<td data-label="Plan">`+fixed.Name+`</td>`, web.ByteSize(total), money(top.GetPrice().GetTotalMinor())+" EUR")
	if strings.Contains(page.Body, "No top-ups") || strings.Contains(page.Body, "Data used up") {
		t.Errorf("the topped-up eSIM's page still says it has no top-ups or is used up:\n%s", page.Body)
	}

	expired := simulate("expire", nil, "EXPIRED")
	must(t, "expired", u.Get(path), http.StatusOK, "status-expired", "<strong>Expired</strong> <time datetime=", "expired "+utc(expired.GetExpiresAt()), "Validity over")
	wantListed("EXPIRED", es.ID)

	// Its events, each told once it reached webhook: every step's, the
	// usage thresholds with their percentage, the top-up's; none of them
	// on the page of the other eSIM of its order.
	page = waitFor(t, u, path, "order.completed", ">esim.installed<", ">esim.activated<", ">esim.usage 50%<", ">esim.usage 80%<",
		">esim.usage 100%<", ">topup.completed<", ">esim.expired<")
	must(t, "its events", page, http.StatusOK)
	siblingPage := u.Get("/sandbox/esims/" + sibling.ID)
	must(t, "the other eSIM of its order", siblingPage, http.StatusOK, "order.completed", "status-allocated")
	if strings.Contains(siblingPage.Body, `<td data-label="Type">esim.`) || strings.Contains(siblingPage.Body, `<td data-label="Type">topup.`) {
		t.Errorf("the other eSIM's page lists this one's events:\n%s", siblingPage.Body)
	}
	ev := regexp.MustCompile(`href="/sandbox/events/(evt_[0-9a-f]{32})"><code class="id-full">evt_[0-9a-f]{32}</code>.*?</td>\s*<td data-label="Type">topup.completed<`).FindStringSubmatch(page.Body)
	if ev == nil {
		t.Fatalf("no link to the topup.completed event:\n%s", page.Body)
	}
	must(t, "the top-up's event", u.Get("/sandbox/events/"+ev[1]), http.StatusOK, `<a href="/sandbox/esims/`+es.ID+`">`)
	usageEvents := u.Get("/sandbox/events?type=esim.usage")
	must(t, "the events page by a new type", usageEvents, http.StatusOK, `<td data-label="Type">esim.usage</td>`, `<option value="esim.usage" selected>`)
	if strings.Contains(usageEvents.Body, `<td data-label="Type">esim.installed</td>`) || strings.Contains(usageEvents.Body, `<td data-label="Type">order.completed</td>`) {
		t.Errorf("the events of type esim.usage list others:\n%s", usageEvents.Body)
	}

	// A per-day plan's data is unlimited: no meter, what was used.
	page = u.Get("/sandbox/esims/" + daily.ID)
	must(t, "unlimited", page, http.StatusOK, `<p class="amount">Unlimited</p>`, "0 bytes used.")
	if strings.Contains(page.Body, "<meter") {
		t.Error("an unlimited eSIM's page shows a usage meter")
	}
	must(t, "unlimited in the list", u.Get("/sandbox/esims?status=ALLOCATED"), http.StatusOK, "0 bytes (unlimited)")
}

// money writes minor units as the pages do.
func money(minor int64) string { return fmt.Sprintf("%d.%02d", minor/100, minor%100) }

// With ordering or webhook unreachable, the pages that need them are the
// 500 page (the cause logged, the request id shown), never a page that
// passes an eSIM's missing events or a missing list for empty ones.
func TestEsimPagesWhenAServiceFails(t *testing.T) {
	p := portaltest.Start(t)
	u := p.SignUp("Unlucky Travel", "GBP")
	if res := u.Post("/sandbox/balance/topup", url.Values{"amount": {"100"}}); res.Status != http.StatusSeeOther {
		t.Fatalf("top-up: %d %s", res.Status, res.Body)
	}
	_, _, esims := orderEsims(t, p, createKey(t, u, "sandbox", "failures"), "fixed", 1)
	path := "/sandbox/esims/" + esims[0].ID
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	noWebhook := u.At(p.StartPortal(func(c *server.Config) { c.WebhookURL = config.BaseURL(dead.URL) }))
	must(t, "the eSIM without webhook", noWebhook.Get(path), http.StatusInternalServerError, "Something went wrong", "tell support this request id: <code class=\"request-id\">")
	must(t, "the eSIMs without webhook", noWebhook.Get("/sandbox/esims"), http.StatusOK, esims[0].ICCID)

	noOrdering := u.At(p.StartPortal(func(c *server.Config) { c.OrderingURL = config.BaseURL(dead.URL) }))
	must(t, "the eSIM without ordering", noOrdering.Get(path), http.StatusInternalServerError, "Something went wrong", "tell support this request id: <code class=\"request-id\">")
	must(t, "the eSIMs without ordering", noOrdering.Get("/sandbox/esims"), http.StatusInternalServerError, "Something went wrong", "tell support this request id: <code class=\"request-id\">")

	// The platform's own portal, its services up, shows them still.
	must(t, "the eSIM", u.Get(path), http.StatusOK, esims[0].ICCID, "status-allocated")
}
