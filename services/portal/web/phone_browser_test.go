package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"

	"github.com/esimplatform/esim/services/portal/portaltest"
)

// artifactsDir is where a browser test keeps its screenshots:
// $ESIM_ARTIFACTS/portal/<name>, or .run/artifacts/portal/<name> at the
// repository's root (git-ignored), emptied of an earlier run's first.
func artifactsDir(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("ESIM_ARTIFACTS")
	if dir == "" {
		root, err := filepath.Abs(".")
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(root, "go.work")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Fatal("no go.work above the test's folder: set ESIM_ARTIFACTS")
			}
			root = parent
		}
		dir = filepath.Join(root, ".run", "artifacts")
	}
	dir = filepath.Join(dir, "portal", name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type ordered struct {
	ID    string `json:"id"`
	Esims []struct {
		ID    string `json:"id"`
		ICCID string `json:"iccid"`
	} `json:"esims"`
}

// firstFixedPlan is the id and name of the API's first fixed plan.
func firstFixedPlan(t *testing.T, p *portaltest.Platform, key string) (id, name string) {
	t.Helper()
	status, body := api(t, p, http.MethodGet, "/plans?type=fixed&limit=1", key, "")
	var plans struct {
		Data []plan `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &plans); status != http.StatusOK || err != nil || len(plans.Data) == 0 {
		t.Fatalf("plans: %d %v %s", status, err, body)
	}
	return plans.Data[0].ID, plans.Data[0].Name
}

// endpointOf asks for u's sandbox webhook endpoint.
func endpointOf(u *portaltest.User) *webhookv1.GetEndpointRequest {
	return &webhookv1.GetEndpointRequest{Scope: &webhookv1.Scope{AccountId: u.AccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}}
}

// orderFor orders quantity eSIMs of the first fixed plan for a customer.
func orderFor(t *testing.T, p *portaltest.Platform, key string, quantity int, customer string) ordered {
	t.Helper()
	planID, _ := firstFixedPlan(t, p, key)
	status, body := api(t, p, http.MethodPost, "/orders", key,
		fmt.Sprintf(`{"plan_id": %q, "quantity": %d, "customer": %s}`, planID, quantity, customer))
	var o struct {
		Data ordered `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &o); status != http.StatusCreated || err != nil || len(o.Data.Esims) != quantity {
		t.Fatalf("order: %d %v %s", status, err, body)
	}
	return o.Data
}

// phoneLayout is what the 390 px checks measure on a page.
type phoneLayout struct {
	ViewportWidth, ViewportHeight float64
	// HeaderBottom is where the header and the sections' bar end.
	HeaderBottom float64
	// ScrollWidth is the widest of the page's and its body's.
	ScrollWidth float64
	// Ids counts ids shown short (visible, ending in their last
	// characters) with a visible copy button; LongIDs those shown whole.
	Ids, LongIDs int
	// HeadVisible counts visible table headers: tables are cards.
	HeadVisible int
	// BorderContrast is the lowest contrast of an input's border
	// against the page behind the input.
	BorderContrast float64
}

const measurePhone = `(() => {
  const visible = el => el && getComputedStyle(el).display !== "none" && el.getClientRects().length > 0;
  const lum = c => {
    const [r, g, b] = c.match(/[0-9.]+/g).slice(0, 3).map(Number).map(v => v / 255)
      .map(v => v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4));
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  let contrast = 99;
  document.querySelectorAll("main input:not([type=hidden]), header input").forEach(i => {
    if (!visible(i)) return;
    const a = lum(getComputedStyle(i).borderTopColor), b = lum("rgb(255, 255, 255)");
    contrast = Math.min(contrast, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05));
  });
  let ids = 0, long = 0;
  document.querySelectorAll("main .id").forEach(s => {
    const short = s.querySelector(".id-short"), full = s.querySelector(".id-full"), copy = s.querySelector("button.copy-id");
    if (visible(short) && short.textContent.includes("…") && visible(copy)) ids++;
    if (visible(full)) long++;
  });
  const nav = document.querySelector("nav.sections") || document.querySelector("header");
  return {
    ViewportWidth: window.innerWidth, ViewportHeight: window.innerHeight,
    HeaderBottom: nav.getBoundingClientRect().bottom + window.scrollY,
    ScrollWidth: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
    Ids: ids, LongIDs: long,
    HeadVisible: [...document.querySelectorAll("main thead")].filter(h => h.getBoundingClientRect().height > 1).length,
    BorderContrast: contrast,
  };
})()`

// TestSearchAndPhonesInABrowser searches as a partner would in Debian's
// Chromium, headless: by a customer's email (its start, in another
// case) and by an ICCID printed in groups of four, to the eSIM's page;
// then reads the orders and an order at 390 pixels wide, measuring that
// the header takes less than a fifth of the screen, that nothing
// overflows sideways, that ids are shortened with a copy button (whose
// "Copied" is announced) and that input borders reach 3:1. Screenshots
// are kept in the folder the test logs.
func TestSearchAndPhonesInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a real browser")
	}
	shots := artifactsDir(t, "search-and-phones")
	t.Logf("screenshots: %s", shots)
	p := portaltest.Start(t)
	u := p.SignUp("Phone Travel", "EUR")
	if res := u.Post("/sandbox/balance/topup", url.Values{"amount": {"900"}}); res.Status != http.StatusSeeOther {
		t.Fatalf("top-up: %d", res.Status)
	}
	key := createKey(t, u, "sandbox", "phone")
	mia := orderFor(t, p, key, 2, `{"name": "Mia Rossi", "email": "mia.rossi@example.com", "reference": "BK-2041"}`)
	noah := orderFor(t, p, key, 1, `{"name": "Noah Berg", "email": "noah@example.org", "reference": "BK-3310"}`)

	_, run := openBrowser(t)
	shoot := func(name string) {
		t.Helper()
		var png []byte
		run("screenshot "+name, into(&png, chromedp.FullScreenshot(100)))
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	count := func(selector string) int {
		t.Helper()
		var n int
		run("count "+selector, into(&n, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, selector))))
		return n
	}
	search := func(q string) {
		t.Helper()
		run("search "+q, chromedp.SetValue(chromedp.CSS("#site-search"), q),
			chromedp.Submit(chromedp.CSS("#site-search")),
			chromedp.WaitVisible(chromedp.CSS(`p.search-summary, p.empty`)))
	}

	run("sign in", chromedp.Navigate(p.URL+"/signin"), chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), u.Email),
		chromedp.SendKeys(chromedp.CSS("#password"), u.Password),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#site-search`)))

	// By the start of an email, in another case: Mia's order only.
	search("MIA.Rossi@")
	shoot("search-email-1280")
	if n := count(`main a[href="/sandbox/orders/` + mia.ID + `"]`); n != 1 {
		t.Errorf("the search by email links Mia's order %d times, want once", n)
	}
	if n := count(`main a[href="/sandbox/orders/` + noah.ID + `"]`); n != 0 {
		t.Errorf("the search by Mia's email lists Noah's order")
	}
	var found string
	run("results", into(&found, chromedp.Text(chromedp.CSS("main"))))
	for _, want := range []string{"Orders (1)", "Mia Rossi", "BK-2041", "Completed"} {
		if !strings.Contains(found, want) {
			t.Errorf("the results lack %q:\n%s", want, found)
		}
	}

	// By an ICCID as printed, in groups of four: that eSIM, then its page.
	iccid := mia.Esims[1].ICCID
	var grouped []string
	for i := 0; i < len(iccid); i += 4 {
		grouped = append(grouped, iccid[i:min(i+4, len(iccid))])
	}
	search(strings.Join(grouped, " "))
	shoot("search-iccid-1280")
	if n := count(`main a[href^="/sandbox/esims/"]`); n != 1 {
		t.Fatalf("the search by ICCID links %d eSIMs, want 1", n)
	}
	var meterLabels int
	var esimPage string
	run("the eSIM's page", chromedp.Click(chromedp.CSS(`main a[href="/sandbox/esims/`+mia.Esims[1].ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`meter#usage`)),
		into(&meterLabels, chromedp.Evaluate[int](`document.querySelector("meter#usage").labels.length`)),
		into(&esimPage, chromedp.Text(chromedp.CSS("main"))))
	shoot("esim-1280")
	for _, want := range []string{iccid, "Allocated", "Lifecycle", "Issued", "Top-ups"} {
		if !strings.Contains(esimPage, want) {
			t.Errorf("the eSIM's page lacks %q:\n%s", want, esimPage)
		}
	}
	if meterLabels != 1 || strings.Contains(esimPage, "ALLOCATED") {
		t.Errorf("the eSIM's page: %d labels on its meter, or a status in capitals:\n%s", meterLabels, esimPage)
	}

	// An order's id finds the order and its events.
	search(mia.ID)
	if n := count(`main a[href="/sandbox/orders/` + mia.ID + `"]`); n != 1 {
		t.Errorf("the search by order id links the order %d times, want once", n)
	}
	if n := count(`#events-found`); n != 1 {
		t.Errorf("the search by order id lists no events of the order")
	}

	// Phones: the orders and an order at 390 x 844 CSS pixels.
	measure := func(page string) phoneLayout {
		t.Helper()
		var m phoneLayout
		run("measure "+page, into(&m, chromedp.Evaluate[phoneLayout](measurePhone)))
		t.Logf("%s at 390 px: %+v", page, m)
		if m.ViewportWidth != 390 {
			t.Fatalf("%s: the viewport is %v px wide, want 390", page, m.ViewportWidth)
		}
		if m.HeaderBottom >= m.ViewportHeight/5 {
			t.Errorf("%s: the header ends %v px down, a fifth or more of the %v px screen", page, m.HeaderBottom, m.ViewportHeight)
		}
		if m.ScrollWidth > m.ViewportWidth {
			t.Errorf("%s: the page is %v px wide, overflowing the %v px screen", page, m.ScrollWidth, m.ViewportWidth)
		}
		if m.Ids == 0 || m.LongIDs != 0 {
			t.Errorf("%s: %d ids shortened with a copy button, %d shown whole; want some, none", page, m.Ids, m.LongIDs)
		}
		if m.HeadVisible != 0 {
			t.Errorf("%s: %d table headers shown: tables should be cards", page, m.HeadVisible)
		}
		if m.BorderContrast < 3 {
			t.Errorf("%s: an input's border has %.2f:1 contrast, want 3:1", page, m.BorderContrast)
		}
		return m
	}
	run("orders at 390 px", chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(p.URL+"/sandbox/orders"), chromedp.WaitVisible(chromedp.CSS(`main .id-short`)))
	shoot("orders-390")
	orders := measure("orders")
	if orders.Ids != 2 {
		t.Errorf("the orders page shows %d short order ids, want 2", orders.Ids)
	}
	run("an order at 390 px", chromedp.Navigate(p.URL+"/sandbox/orders/"+mia.ID), chromedp.WaitVisible(chromedp.CSS(`main .id-short`)))
	shoot("order-390")
	measure("order")

	// A copy button says "Copied", and so does the live region.
	var live struct {
		Text, Live string
	}
	run("copy an id", chromedp.Click(chromedp.CSS(`main button.copy-id`)),
		into(&live, chromedp.Poll[struct{ Text, Live string }](
			`(s => s && s.textContent === "Copied" && {Text: s.textContent, Live: s.getAttribute("aria-live")})(document.getElementById("copy-status"))`,
			chromedp.WithPollingTimeout(10*time.Second))))
	if live.Text != "Copied" || live.Live != "polite" {
		t.Errorf("the live region says %q (aria-live %q), want Copied, polite", live.Text, live.Live)
	}
	shoot("order-390-copied")
}
