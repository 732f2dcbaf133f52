package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/esimplatform/esim/libs/internalauth"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/portal/portaltest"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// openBrowser starts Debian's Chromium headless for a test, closed when
// it ends, and returns its context and run, which does a step's actions
// and fails the test naming the step.
func openBrowser(t *testing.T) (context.Context, func(step string, actions ...chromedp.Action[chromedp.Void])) {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (apt-get install chromium; .ci/run installs it)")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx, func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
}

// TestInABrowser walks what a partner does in the portal, in Debian's
// Chromium driven headless: signs up, switches to the sandbox, creates a
// key and reads it off the page (and reloads that page, to see the secret
// gone and no second key), tops the balance up, orders with that
// key through the API, sees the order with its QR image loaded (and
// decodes the image to the activation code shown), sets a local receiver
// as the webhook URL, sends a test event and sees its attempt, revokes
// the key and sees the API refuse it. Each page is photographed at 1280
// and 390 px wide into a folder the test prints.
func TestInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a real browser")
	}
	p := portaltest.Start(t)
	shots := artifactsDir(t, "walk")
	t.Logf("screenshots of every page at 1280 and 390 px: %s", shots)

	ctx, run := openBrowser(t)
	shoot := func(name string) {
		t.Helper()
		for _, width := range []int64{1280, 390} {
			var png []byte
			run("screenshot "+name, chromedp.EmulateViewport(width, 900), into(&png, chromedp.FullScreenshot(100)))
			if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%s-%d.png", name, width)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		run("viewport", chromedp.EmulateViewport(1280, 900))
	}
	var location string
	at := func(step, want string) {
		t.Helper()
		run(step, into(&location, chromedp.Location()))
		if !strings.HasPrefix(location, p.URL+want) {
			t.Fatalf("%s: at %s, want %s%s", step, location, p.URL, want)
		}
	}

	// Sign up.
	email := portaltest.UniqueEmail("browser")
	run("sign in page", chromedp.Navigate(p.URL+"/signin"), chromedp.WaitVisible(chromedp.CSS("#email")))
	shoot("signin")
	run("sign up", chromedp.Navigate(p.URL+"/signup"), chromedp.WaitVisible(chromedp.CSS("#email")))
	shoot("signup")
	run("sign up",
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), "correct horse battery"),
		chromedp.SendKeys(chromedp.CSS("#account_name"), "Browser Travel"),
		chromedp.SetValue(chromedp.CSS("#currency"), "EUR"),
		chromedp.Click(chromedp.CSS(`main form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav.switch`)))
	shoot("overview")

	// Switch to live and back to the sandbox with the switch.
	run("to live", chromedp.Navigate(p.URL+"/live/"), chromedp.WaitVisible(chromedp.CSS(`nav.switch a`)))
	shoot("overview-live")
	run("switch to sandbox", chromedp.Click(chromedp.CSS(`nav.switch a`)), chromedp.WaitVisible(chromedp.CSS(`.banner.sandbox`)))
	at("switch to sandbox", "/sandbox/")

	// Create a key and read it off the page.
	var secret string
	run("keys", chromedp.Navigate(p.URL+"/sandbox/keys"), chromedp.WaitVisible(chromedp.CSS("#name")))
	shoot("keys")
	run("create a key",
		chromedp.SendKeys(chromedp.CSS("#name"), "browser test"),
		chromedp.Click(chromedp.CSS(`form[action="/sandbox/keys"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#secret")),
		into(&secret, chromedp.Value(chromedp.CSS("#secret"))))
	shoot("key-created")
	if !strings.HasPrefix(secret, "sk_sandbox_") {
		t.Fatalf("the page shows the key %q", secret)
	}
	at("the new key's page", "/sandbox/new-key/")
	// A reload of the page that showed the secret shows it no more and
	// makes no second key: the form's POST is behind a redirect.
	var page string
	var keyRows int
	run("reload the new key's page", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`main`)),
		into(&page, chromedp.OuterHTML(chromedp.CSS("html"))))
	if strings.Contains(page, `id="secret"`) {
		t.Fatal("the reloaded page shows a secret")
	}
	at("reloaded", "/sandbox/keys?done=shown")
	run("the keys", into(&keyRows, chromedp.Evaluate[int](`document.querySelectorAll('a[href$="/revoke"]').length`)))
	shoot("key-reloaded")
	if strings.Contains(page, secret) || !strings.Contains(page, "shown only once") {
		t.Error("the reloaded page shows the secret, or does not say it was shown")
	}
	if keyRows != 1 {
		t.Errorf("%d keys listed after creating one and reloading, want 1", keyRows)
	}

	// Free sandbox money, then an order through the API with the key.
	run("top up", chromedp.Navigate(p.URL+"/sandbox/balance"), chromedp.WaitVisible(chromedp.CSS("#amount")),
		chromedp.SendKeys(chromedp.CSS("#amount"), "100.00"),
		chromedp.Click(chromedp.CSS(`form[action="/sandbox/balance/topup"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)))
	shoot("balance")
	orderID := placeOrder(t, p.APIURL, secret)

	// The order, its QR image loaded, decoding to the code on the page.
	run("orders", chromedp.Navigate(p.URL+"/sandbox/orders"), chromedp.WaitVisible(chromedp.CSS(`a[href="/sandbox/orders/`+orderID+`"]`)))
	shoot("orders")
	var width int
	var qrSrc chromedp.AttributeResult
	var code string
	run("order",
		chromedp.Click(chromedp.CSS(`a[href="/sandbox/orders/`+orderID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("img.qr")),
		into(&width, chromedp.Poll[int](`document.querySelector("img.qr").complete && document.querySelector("img.qr").naturalWidth`, chromedp.WithPollingTimeout(20*time.Second))),
		into(&qrSrc, chromedp.AttributeValue(chromedp.CSS("img.qr"), "src")),
		into(&code, chromedp.Value(chromedp.CSS("#code-0"))))
	shoot("order")
	if width <= 0 {
		t.Fatalf("the QR image did not load (naturalWidth %d)", width)
	}
	if got := decodeQR(t, qrSrc.Value); got != code || !strings.HasPrefix(code, "LPA:1$") {
		t.Errorf("the QR image decodes to %q; the page shows the activation code %q", got, code)
	}

	// The eSIM: found on the eSIMs page by its ICCID, its page with its
	// usage meter (labelled), its lifecycle and its order's completion.
	var iccid string
	run("the order's eSIM", into(&iccid, chromedp.Text(chromedp.CSS(`section.esim h2 code`))))
	run("eSIMs", chromedp.Click(chromedp.CSS(`nav.sections a[href="/sandbox/esims"]`)), chromedp.WaitVisible(chromedp.CSS(`#iccid`)))
	shoot("esims")
	var listed int
	run("search by ICCID", chromedp.SendKeys(chromedp.CSS(`#iccid`), iccid),
		chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#iccid[value="`+iccid+`"]`)),
		into(&listed, chromedp.Evaluate[int](`document.querySelectorAll('a[href^="/sandbox/esims/"]').length`)))
	if listed != 1 {
		t.Errorf("the search by ICCID lists %d eSIMs, want 1", listed)
	}
	var meter struct {
		Value, Max float64
		Labels     int
	}
	var timeline string
	run("the eSIM's page", chromedp.Click(chromedp.CSS(`a[href^="/sandbox/esims/"]`)),
		chromedp.WaitVisible(chromedp.CSS(`meter#usage`)),
		into(&meter, chromedp.Evaluate[struct {
			Value, Max float64
			Labels     int
		}](`(m => ({Value: m.value, Max: m.max, Labels: m.labels.length}))(document.querySelector("meter#usage"))`)),
		into(&timeline, chromedp.Text(chromedp.CSS(`ol.timeline`))))
	shoot("esim")
	if meter.Value != 0 || meter.Max <= 0 || meter.Labels != 1 {
		t.Errorf("the usage meter is %+v, want 0 of the plan's bytes, labelled", meter)
	}
	for _, want := range []string{"Done:", "Issued", "To come:", "Installed", "Activated", "Expires"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, timeline)
		}
	}
	// Installed, activated, 60 percent used and topped up in the sandbox,
	// the reloaded page shows it all.
	at("the eSIM's page", "/sandbox/esims/")
	esim, err := p.Ordering.GetEsim(ctx, &orderingv1.GetEsimRequest{Id: location[strings.LastIndex(location, "/")+1:]})
	if err != nil {
		t.Fatal(err)
	}
	scope := &orderingv1.Scope{AccountId: esim.GetAccountId(), Environment: esim.GetEnvironment()}
	used := esim.GetData().GetTotalBytes() * 6 / 10
	for _, sim := range []*orderingv1.SimulateEsimRequest{{Action: "install"}, {Action: "activate"}, {Action: "consume", Bytes: &used}} {
		sim.Scope, sim.EsimId = scope, esim.GetId()
		if _, err := p.Ordering.SimulateEsim(ctx, sim); err != nil {
			t.Fatalf("simulate %s: %v", sim.Action, err)
		}
	}
	if _, err := orderingtest.Client(p.OrderingURL, internalauth.Gateway).CreateTopUp(ctx, &orderingv1.CreateTopUpRequest{
		Scope: scope, Currency: "EUR", IdempotencyKey: "browser-topup", EsimId: esim.GetId(), PlanId: esim.GetPlanId(),
	}); err != nil {
		t.Fatal(err)
	}
	var topups, toCome int
	run("the eSIM, later", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`meter#usage`)),
		into(&meter, chromedp.Evaluate[struct {
			Value, Max float64
			Labels     int
		}](`(m => ({Value: m.value, Max: m.max, Labels: m.labels.length}))(document.querySelector("meter#usage"))`)),
		into(&timeline, chromedp.Text(chromedp.CSS(`ol.timeline`))),
		into(&topups, chromedp.Evaluate[int](`document.querySelectorAll('#topups-heading ~ table tbody tr').length`)),
		into(&toCome, chromedp.Evaluate[int](`document.querySelectorAll('ol.timeline li.todo').length`)))
	shoot("esim-active")
	if meter.Value != float64(used) || meter.Max != float64(2*esim.GetData().GetTotalBytes()) {
		t.Errorf("the usage meter is %+v, want %d of %d bytes", meter, used, 2*esim.GetData().GetTotalBytes())
	}
	if toCome != 1 || !strings.Contains(timeline, "Top-up") || topups != 1 {
		t.Errorf("the timeline after install, activation and a top-up (%d steps to come, want the expiry only; %d rows of top-ups):\n%s", toCome, topups, timeline)
	}

	// A local receiver as the webhook URL, a test event, its attempt.
	receiver := webhooktest.NewReceiver(t)
	run("webhooks", chromedp.Navigate(p.URL+"/sandbox/webhooks"), chromedp.WaitVisible(chromedp.CSS("#url")),
		chromedp.SendKeys(chromedp.CSS("#url"), receiver.URL),
		chromedp.Click(chromedp.CSS(`form[action="/sandbox/webhooks"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/sandbox/webhooks/test"] button`)))
	shoot("webhooks")
	run("send a test event", chromedp.Click(chromedp.CSS(`form[action="/sandbox/webhooks/test"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href^="/sandbox/events/evt_"]`)))
	receiver.Wait(t, 1, 30*time.Second)
	var attempts string
	deadline := time.Now().Add(30 * time.Second)
	for {
		run("the event's attempts", chromedp.Navigate(p.URL+"/sandbox/events"),
			chromedp.Click(chromedp.CSS(`a[href^="/sandbox/events/evt_"]`)),
			chromedp.WaitVisible(chromedp.CSS(`main`)),
			into(&attempts, chromedp.Text(chromedp.CSS(`main`))))
		if strings.Contains(attempts, "Attempt 1") && strings.Contains(attempts, "200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivered attempt listed after 30 s:\n%s", attempts)
		}
		time.Sleep(200 * time.Millisecond)
	}
	shoot("event")
	run("events", chromedp.Navigate(p.URL+"/sandbox/events"), chromedp.WaitVisible(chromedp.CSS(`main`)))
	shoot("events")

	// Revoke the key, confirming, and the API refuses it.
	run("revoke", chromedp.Navigate(p.URL+"/sandbox/keys"),
		chromedp.Click(chromedp.CSS(`a[href$="/revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button.danger`)))
	shoot("revoke")
	run("confirm", chromedp.Click(chromedp.CSS(`button.danger`)), chromedp.WaitVisible(chromedp.CSS(`#name`)))
	deadline = time.Now().Add(5 * time.Second)
	for status := 0; status != http.StatusUnauthorized; status = apiStatus(t, p.APIURL+"/plans?limit=1", secret) {
		if time.Now().After(deadline) {
			t.Fatalf("the API still answers %d to the revoked key after 5 s", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run("settings", chromedp.Navigate(p.URL+"/settings/password"), chromedp.WaitVisible(chromedp.CSS(`main`)))
	shoot("password")
}

// into runs a and keeps its value in dst, so that steps with a value sit
// in one sequence with the others.
func into[T any](dst *T, a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		v, err := a(ctx, tg)
		*dst = v
		return chromedp.Void{}, err
	}
}

// placeOrder orders one eSIM of the first fixed plan with key and returns
// the order's id.
func placeOrder(t *testing.T, api, key string) string {
	t.Helper()
	var plans struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	req, _ := http.NewRequest(http.MethodGet, api+"/plans?type=fixed&limit=1", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	doJSON(t, req, http.StatusOK, &plans)
	if len(plans.Data) == 0 {
		t.Fatal("no fixed plan")
	}
	req, _ = http.NewRequest(http.MethodPost, api+"/orders", strings.NewReader(`{"plan_id":"`+plans.Data[0].ID+`"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "browser-order")
	var order struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	doJSON(t, req, http.StatusCreated, &order)
	return order.Data.ID
}

func doJSON(t *testing.T, req *http.Request, want int, v any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d", req.Method, req.URL, resp.StatusCode, want)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func apiStatus(t *testing.T, url, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// decodeQR fetches the image the page showed and reads the QR code in it.
func decodeQR(t *testing.T, src string) string {
	t.Helper()
	resp, err := http.Get(src)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	img, _, err := image.Decode(resp.Body)
	if err != nil {
		t.Fatalf("%s is not an image: %v", src, err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("%s holds no QR code: %v", src, err)
	}
	return res.GetText()
}
