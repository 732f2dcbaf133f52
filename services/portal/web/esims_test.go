package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/portal/portaltest"
	"github.com/esimplatform/esim/services/portal/web"
)

// fixedPlan is the first fixed plan the API lists to key.
type fixedPlan struct {
	ID   string `json:"id"`
	Data struct {
		TotalBytes int64 `json:"total_bytes"`
	} `json:"data"`
	ValidityDays int `json:"validity_days"`
}

// orderedEsim is an eSIM as the API's order answer shows it.
type orderedEsim struct {
	ID    string `json:"id"`
	ICCID string `json:"iccid"`
}

// orderEsims has u order quantity eSIMs of the first fixed plan with a
// new sandbox key, after adding sandbox money, and returns the plan, the
// order's id and its eSIMs.
func orderEsims(t *testing.T, p *portaltest.Platform, u *portaltest.User, quantity int) (fixedPlan, string, []orderedEsim) {
	t.Helper()
	if res := u.Post("/sandbox/balance/topup", url.Values{"amount": {"500"}}); res.Status != http.StatusSeeOther {
		t.Fatalf("top-up: %d %s", res.Status, res.Body)
	}
	secret := createKey(t, u, "sandbox", "eSIM pages")
	status, body := api(t, p, http.MethodGet, "/plans?type=fixed&limit=1", secret, "")
	var plans struct {
		Data []fixedPlan `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &plans); status != http.StatusOK || err != nil || len(plans.Data) == 0 {
		t.Fatalf("plans: %d %v %s", status, err, body)
	}
	plan := plans.Data[0]
	status, body = api(t, p, http.MethodPost, "/orders", secret, `{"plan_id": "`+plan.ID+`", "quantity": `+strconv.Itoa(quantity)+`}`)
	var order struct {
		Data struct {
			ID    string        `json:"id"`
			Esims []orderedEsim `json:"esims"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &order); status != http.StatusCreated || err != nil || len(order.Data.Esims) != quantity {
		t.Fatalf("order: %d %v %s", status, err, body)
	}
	return plan, order.Data.ID, order.Data.Esims
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

	plan, orderID, esims := orderEsims(t, p, u, 2)
	_, otherOrder, _ := orderEsims(t, p, u, 1)

	// The list: every eSIM, newest first, each linked to its page.
	list := u.Get("/sandbox/esims")
	must(t, "eSIMs", list, http.StatusOK, "Page 1 of 1 (3 in all)", "ALLOCATED", "status-allocated", "after activation",
		"0 bytes of "+web.ByteSize(plan.Data.TotalBytes), `href="/sandbox/orders/`+orderID+`"`)
	for _, e := range esims {
		must(t, "eSIMs", list, http.StatusOK, `<a href="/sandbox/esims/`+e.ID+`"><code>`+e.ICCID+`</code></a>`)
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
	anon := p.NewBrowser()
	for _, path := range []string{"/sandbox/esims", path} {
		if res := anon.Get(path); res.Status != http.StatusSeeOther || res.Location() != "/signin?next="+url.QueryEscape(path) {
			t.Errorf("%s signed out: %d %s", path, res.Status, res.Location())
		}
	}
}
