package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/esimplatform/esim/libs/money"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
)

const (
	sandbox = accountsv1.Environment_ENVIRONMENT_SANDBOX
	live    = accountsv1.Environment_ENVIRONMENT_LIVE
)

type esimJSON struct {
	ID             string `json:"id"`
	OrderID        string `json:"order_id"`
	PlanName       string `json:"plan_name"`
	ICCID          string `json:"iccid"`
	QRCodeURL      string `json:"qr_code_url"`
	ActivationCode string `json:"activation_code"`
	SMDPAddress    string `json:"smdp_address"`
	Status         string `json:"status"`
	ValidityDays   int    `json:"validity_days"`
	Data           struct {
		Unlimited  bool   `json:"unlimited"`
		TotalBytes *int64 `json:"total_bytes"`
		UsedBytes  int64  `json:"used_bytes"`
		UpdatedAt  string `json:"updated_at"`
	} `json:"data"`
	Install struct {
		Instructions         string `json:"instructions"`
		IOSUniversalLink     string `json:"ios_universal_link"`
		AndroidUniversalLink string `json:"android_universal_link"`
	} `json:"install"`
}

type orderJSON struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Environment string `json:"environment"`
	PlanID      string `json:"plan_id"`
	Quantity    int    `json:"quantity"`
	Days        *int   `json:"days"`
	Price       struct {
		Unit     json.Number `json:"unit"`
		Total    json.Number `json:"total"`
		Currency string      `json:"currency"`
	} `json:"price"`
	Customer struct {
		Name      *string `json:"name"`
		Email     *string `json:"email"`
		Reference *string `json:"reference"`
	} `json:"customer"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Esims []esimJSON `json:"esims"`
}

// partner is an account with a key in one environment, its balance topped
// up through the wallet as an operator would.
type partner struct {
	p         *platform
	accountID string
	key       string
	env       accountsv1.Environment
	currency  string
}

func (p *platform) partner(currency string, env accountsv1.Environment, balanceMinor int64) partner {
	p.t.Helper()
	accountID, _, key := p.account(currency, env)
	pt := partner{p: p, accountID: accountID, key: key, env: env, currency: currency}
	if balanceMinor > 0 {
		pt.topUp(balanceMinor)
	}
	return pt
}

func (pt partner) topUp(amountMinor int64) {
	pt.p.t.Helper()
	pt.p.money.TopUp(pt.p.t, pt.accountID, pt.env, pt.currency, amountMinor, uuid.NewString())
}

// order posts body to /v1/orders with an Idempotency-Key (none when empty).
func (pt partner) order(idempotencyKey, body string) response {
	pt.p.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, pt.p.gateway+"/v1/orders", strings.NewReader(body))
	req.Header.Set("Authorization", bearer(pt.key))
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	return pt.p.send(req)
}

// balance reads GET /v1/balance in minor units.
func (pt partner) balance() int64 {
	pt.p.t.Helper()
	var b struct {
		Data struct {
			Amount      json.Number `json:"amount"`
			Currency    string      `json:"currency"`
			Environment string      `json:"environment"`
		} `json:"data"`
	}
	r := pt.p.get("/v1/balance", bearer(pt.key))
	if r.status != http.StatusOK {
		pt.p.t.Fatalf("GET /v1/balance: %d %s", r.status, r.body)
	}
	r.json(pt.p.t, &b)
	if b.Data.Currency != pt.currency || b.Data.Environment != pt.env.ShortName() {
		pt.p.t.Fatalf("balance in %s %s, want %s %s", b.Data.Currency, b.Data.Environment, pt.currency, pt.env.ShortName())
	}
	minor, err := money.ParseDecimal(b.Data.Amount.String())
	if err != nil {
		pt.p.t.Fatalf("balance amount %s: %v", b.Data.Amount, err)
	}
	return minor
}

// orders lists the partner's orders through the API.
func (pt partner) orders(query string) (list struct {
	Data       []orderJSON `json:"data"`
	Pagination struct {
		Total int `json:"total"`
	} `json:"pagination"`
}) {
	pt.p.t.Helper()
	r := pt.p.get("/v1/orders?"+query, bearer(pt.key))
	if r.status != http.StatusOK {
		pt.p.t.Fatalf("GET /v1/orders?%s: %d %s", query, r.status, r.body)
	}
	r.json(pt.p.t, &list)
	return list
}

// checkMoney fails unless the partner's money is conserved (see
// orderingtest.Deps.CheckMoney).
func (pt partner) checkMoney() {
	pt.p.t.Helper()
	pt.p.money.CheckMoney(pt.p.t, pt.p.orders, pt.accountID, pt.env, pt.currency)
}

// planOf is a plan of type planType, with its price in minor units.
func (p *platform) planOf(key, planType string) (id string, priceMinor int64, validityDays *int) {
	p.t.Helper()
	var list planList
	p.get("/v1/plans?limit=1&type="+planType, bearer(key)).json(p.t, &list)
	if len(list.Data) == 0 {
		p.t.Fatalf("no %s plan", planType)
	}
	price, err := money.ParseDecimal(list.Data[0].Price.Amount.String())
	if err != nil {
		p.t.Fatal(err)
	}
	return list.Data[0].ID, price, list.Data[0].ValidityDays
}

func orderBody(planID string, fields string) string {
	if fields != "" {
		fields = "," + fields
	}
	return fmt.Sprintf(`{"plan_id":%q%s}`, planID, fields)
}

// TestOrdersAFixedAndAPerDayPlan walks the Done-when of orders: a fixed
// plan of quantity 3 and a per-day plan of 7 days, every field of their
// eSIMs, the QR image behind each link, the reads and the balance.
func TestOrdersAFixedAndAPerDayPlan(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("USD", sandbox, 1000_00)
	fixed, fixedPrice, fixedValidity := p.planOf(pt.key, "fixed")
	perDay, dayPrice, _ := p.planOf(pt.key, "per_day")

	r := pt.order("first-order", orderBody(fixed, `"quantity":3,"customer":{"name":"Ada Lovelace","email":"ada@example.com","reference":"BK-1"}`))
	if r.status != http.StatusCreated || r.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("fixed order: %d (replay %q) %s", r.status, r.header.Get("Idempotent-Replay"), r.body)
	}
	var first struct{ Data orderJSON }
	r.json(t, &first)
	o := first.Data
	if r.header.Get("Location") != "/v1/orders/"+o.ID {
		t.Errorf("Location %q, want /v1/orders/%s", r.header.Get("Location"), o.ID)
	}
	if o.Status != "completed" || o.Environment != "sandbox" || o.PlanID != fixed || o.Quantity != 3 || o.Days != nil || o.Error != nil || len(o.Esims) != 3 {
		t.Fatalf("fixed order %+v", o)
	}
	if o.Price.Unit.String() != money.Decimal(fixedPrice) || o.Price.Total.String() != money.Decimal(3*fixedPrice) || o.Price.Currency != "USD" {
		t.Errorf("price %+v, want unit %s total %s USD", o.Price, money.Decimal(fixedPrice), money.Decimal(3*fixedPrice))
	}
	if *o.Customer.Name != "Ada Lovelace" || *o.Customer.Email != "ada@example.com" || *o.Customer.Reference != "BK-1" {
		t.Errorf("customer %+v", o.Customer)
	}
	iccids := map[string]bool{}
	for _, e := range o.Esims {
		checkEsim(t, p, e, o.ID, *fixedValidity)
		iccids[e.ICCID] = true
	}
	if len(iccids) != 3 {
		t.Errorf("ICCIDs %v: want three different", iccids)
	}

	r = pt.order("per-day-order", orderBody(perDay, `"days":7`))
	if r.status != http.StatusCreated {
		t.Fatalf("per-day order: %d %s", r.status, r.body)
	}
	var second struct{ Data orderJSON }
	r.json(t, &second)
	d := second.Data
	if d.Days == nil || *d.Days != 7 || len(d.Esims) != 1 || d.Price.Unit.String() != money.Decimal(7*dayPrice) || d.Price.Total.String() != money.Decimal(7*dayPrice) {
		t.Fatalf("per-day order %+v", d)
	}
	checkEsim(t, p, d.Esims[0], d.ID, 7)
	if !d.Esims[0].Data.Unlimited || d.Esims[0].Data.TotalBytes != nil {
		t.Errorf("per-day eSIM data %+v: want unlimited, total_bytes null", d.Esims[0].Data)
	}
	// Customer fields not given are null.
	if d.Customer.Name != nil || d.Customer.Email != nil || d.Customer.Reference != nil {
		t.Errorf("customer %+v: want nulls", d.Customer)
	}

	// Reads answer the same order, newest first.
	again := p.get("/v1/orders/"+o.ID, bearer(pt.key))
	var got struct{ Data orderJSON }
	again.json(t, &got)
	if again.status != http.StatusOK || !equalJSON(t, got.Data, o) {
		t.Errorf("GET /v1/orders/%s = %d, differs from what POST answered:\n%s", o.ID, again.status, again.body)
	}
	list := pt.orders("limit=10")
	if list.Pagination.Total != 2 || len(list.Data) != 2 || list.Data[0].ID != d.ID || list.Data[1].ID != o.ID {
		t.Errorf("orders %+v, want the per-day order then the fixed one", list)
	}
	if l := pt.orders("reference=BK-1"); len(l.Data) != 1 || l.Data[0].ID != o.ID {
		t.Errorf("orders with reference BK-1: %+v", l)
	}
	if l := pt.orders("status=failed"); len(l.Data) != 0 {
		t.Errorf("failed orders: %+v", l)
	}
	var esims struct{ Data []esimJSON }
	p.get("/v1/esims?order_id="+o.ID, bearer(pt.key)).json(t, &esims)
	if len(esims.Data) != 3 {
		t.Errorf("eSIMs of the fixed order: %d, want 3", len(esims.Data))
	}
	p.get("/v1/esims?iccid="+o.Esims[1].ICCID, bearer(pt.key)).json(t, &esims)
	if len(esims.Data) != 1 || esims.Data[0].ID != o.Esims[1].ID {
		t.Errorf("eSIM by ICCID: %+v", esims.Data)
	}
	p.get("/v1/esims?status=ALLOCATED&order_id="+o.ID, bearer(pt.key)).json(t, &esims)
	if len(esims.Data) != 3 {
		t.Errorf("ALLOCATED eSIMs of the fixed order: %d, want 3", len(esims.Data))
	}
	p.get("/v1/esims?status=ACTIVE", bearer(pt.key)).json(t, &esims)
	if len(esims.Data) != 0 {
		t.Errorf("ACTIVE eSIMs of fresh orders: %+v", esims.Data)
	}
	var one struct{ Data esimJSON }
	if r := p.get("/v1/esims/"+o.Esims[2].ID, bearer(pt.key)); r.status != http.StatusOK {
		t.Errorf("GET /v1/esims/{id}: %d %s", r.status, r.body)
	} else if r.json(t, &one); !equalJSON(t, one.Data, o.Esims[2]) {
		t.Errorf("GET /v1/esims/{id} differs from the order's eSIM: %s", r.body)
	}

	if got, want := pt.balance(), int64(1000_00)-3*fixedPrice-7*dayPrice; got != want {
		t.Errorf("balance %d, want %d", got, want)
	}
	pt.checkMoney()
}

// checkEsim checks one eSIM of an order: its ICCID, its activation code
// and the QR image behind its link, fetched without a key.
func checkEsim(t *testing.T, p *platform, e esimJSON, orderID string, validityDays int) {
	t.Helper()
	if e.OrderID != orderID || e.Status != "ALLOCATED" || e.ValidityDays != validityDays || e.Data.UsedBytes != 0 || e.Data.UpdatedAt == "" || e.PlanName == "" {
		t.Errorf("eSIM %+v", e)
	}
	if len(e.ICCID) != 19 || !strings.HasPrefix(e.ICCID, "89") || !luhn(e.ICCID) {
		t.Errorf("ICCID %q: want 19 digits, starting 89, with a valid Luhn check digit", e.ICCID)
	}
	matching, ok := strings.CutPrefix(e.ActivationCode, "LPA:1$"+e.SMDPAddress+"$")
	if !ok || len(matching) < 16 || e.SMDPAddress == "" {
		t.Errorf("activation code %q for SM-DP+ %q", e.ActivationCode, e.SMDPAddress)
	}
	for _, link := range []string{e.Install.IOSUniversalLink, e.Install.AndroidUniversalLink} {
		u, err := url.Parse(link)
		if err != nil || u.Scheme != "https" || u.Query().Get("carddata") != e.ActivationCode {
			t.Errorf("universal link %q does not carry the activation code", link)
		}
	}
	for _, want := range []string{"iOS", "Android", e.SMDPAddress, matching, e.ActivationCode} {
		if !strings.Contains(e.Install.Instructions, want) {
			t.Errorf("instructions lack %q:\n%s", want, e.Install.Instructions)
		}
	}
	if got := decodeQR(t, e.QRCodeURL); got != e.ActivationCode {
		t.Errorf("the QR image at %s decodes to %q, want %q", e.QRCodeURL, got, e.ActivationCode)
	}
}

// decodeQR fetches a QR image without a key and reads it back.
func decodeQR(t *testing.T, link string) string {
	t.Helper()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatalf("GET %s: %v", link, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("GET %s: %d %s", link, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	img, _, err := image.Decode(resp.Body)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", link, err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	// The image is the code alone, with its quiet zone, as go-qrcode writes it.
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("%s holds no QR code: %v", link, err)
	}
	return res.GetText()
}

func luhn(digits string) bool {
	sum := 0
	for i := range len(digits) {
		d := int(digits[len(digits)-1-i] - '0')
		if i%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestEveryBadOrderIsRefusedAndChargesNothing sends each kind of bad
// order: the status, the code, the fields named, and the balance and the
// orders untouched afterwards.
func TestEveryBadOrderIsRefusedAndChargesNothing(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("EUR", sandbox, 50_00)
	fixed, _, _ := p.planOf(pt.key, "fixed")
	perDay, _, _ := p.planOf(pt.key, "per_day")
	long := strings.Repeat("x", 121)
	for _, tc := range []struct {
		name, key, body string
		status          int
		code            string
		fields          []string
	}{
		{"no plan", "", `{}`, 400, "invalid_request", []string{"plan_id"}},
		{"plan not a uuid", "", `{"plan_id":"japan"}`, 400, "invalid_request", []string{"plan_id"}},
		{"quantity 0", "", orderBody(fixed, `"quantity":0`), 400, "invalid_request", []string{"quantity"}},
		{"quantity 51", "", orderBody(fixed, `"quantity":51`), 400, "invalid_request", []string{"quantity"}},
		{"quantity a string", "", orderBody(fixed, `"quantity":"3"`), 400, "invalid_request", []string{"quantity"}},
		{"quantity a fraction", "", orderBody(fixed, `"quantity":2.5`), 400, "invalid_request", []string{"quantity"}},
		{"days 0", "", orderBody(perDay, `"days":0`), 400, "invalid_request", []string{"days"}},
		{"days 366", "", orderBody(perDay, `"days":366`), 400, "invalid_request", []string{"days"}},
		{"days on a fixed plan", "", orderBody(fixed, `"days":2`), 400, "invalid_request", []string{"days"}},
		{"quantity and days at once", "", orderBody(perDay, `"quantity":0,"days":400`), 400, "invalid_request", []string{"days", "quantity"}},
		{"name too long", "", orderBody(fixed, `"customer":{"name":"`+long+`"}`), 400, "invalid_request", []string{"customer.name"}},
		{"reference too long", "", orderBody(fixed, `"customer":{"reference":"`+long+`"}`), 400, "invalid_request", []string{"customer.reference"}},
		{"not an email", "", orderBody(fixed, `"customer":{"email":"ada at example"}`), 400, "invalid_request", []string{"customer.email"}},
		{"email too long", "", orderBody(fixed, `"customer":{"email":"`+strings.Repeat("a", 250)+`@example.com"}`), 400, "invalid_request", []string{"customer.email"}},
		{"customer not an object", "", orderBody(fixed, `"customer":"Ada"`), 400, "invalid_request", []string{"customer"}},
		{"unknown field", "", orderBody(fixed, `"colour":"red"`), 400, "invalid_request", []string{"colour"}},
		{"unknown customer field", "", orderBody(fixed, `"customer":{"phone":"1"}`), 400, "invalid_request", []string{"customer.phone"}},
		{"a field in another case", "", `{"PLAN_ID":"` + fixed + `"}`, 400, "invalid_request", []string{"PLAN_ID", "plan_id"}},
		{"malformed JSON", "", `{"plan_id":`, 400, "invalid_request", []string{"body"}},
		{"not an object", "", `[1,2]`, 400, "invalid_request", []string{"body"}},
		{"over 1 MiB", "", orderBody(fixed, `"customer":{"name":"`+strings.Repeat("x", 1<<20)+`"}`), 400, "invalid_request", []string{"body"}},
		{"idempotency key too long", strings.Repeat("k", 256), orderBody(fixed, ""), 400, "invalid_request", []string{"Idempotency-Key"}},
		{"idempotency key not ASCII", "clé", orderBody(fixed, ""), 400, "invalid_request", []string{"Idempotency-Key"}},
		{"unknown plan", "", orderBody(uuid.NewString(), ""), 404, "not_found", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := p.expectError(pt.order(tc.key, tc.body), tc.status, tc.code)
			if got := detailFields(e); !slices.Equal(got, tc.fields) {
				t.Errorf("details name %v, want %v: %+v", got, tc.fields, e.Error.Details)
			}
		})
	}
	// A retired plan is not_found too.
	if _, err := p.catalogue.RetirePlan(t.Context(), &cataloguev1.RetirePlanRequest{Id: fixed}); err != nil {
		t.Fatal(err)
	}
	p.expectError(pt.order("retired", orderBody(fixed, "")), http.StatusNotFound, "not_found")
	// A body sent as a form (curl -d's default) names what to send instead.
	form, _ := http.NewRequest(http.MethodPost, p.gateway+"/v1/orders", strings.NewReader(orderBody(perDay, "")))
	form.Header.Set("Authorization", bearer(pt.key))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	e := p.expectError(p.send(form), http.StatusBadRequest, "invalid_request")
	if len(e.Error.Details) != 1 || e.Error.Details[0].Field != "body" || !strings.Contains(e.Error.Details[0].Reason, "application/json") {
		t.Errorf("a form body: %+v", e.Error)
	}
	// Without a key: unauthorized, before the body is read.
	req, _ := http.NewRequest(http.MethodPost, p.gateway+"/v1/orders", strings.NewReader(orderBody(perDay, "")))
	p.expectError(p.send(req), http.StatusUnauthorized, "unauthorized")

	if got := pt.balance(); got != 50_00 {
		t.Errorf("balance %d after refused orders, want 5000", got)
	}
	if l := pt.orders(""); l.Pagination.Total != 0 {
		t.Errorf("%d orders after refused ones, want none", l.Pagination.Total)
	}
	pt.checkMoney()
}

// TestOrderWithoutIdempotencyKeyAndOverTheRateLimit: no key is no replay
// protection (two orders); a key over its allowance is rate_limited
// before anything is charged.
func TestOrderWithoutIdempotencyKeyAndOverTheRateLimit(t *testing.T) {
	p := start(t, options{defaultRateLimit: 4})
	pt := p.partner("USD", sandbox, 1000_00)
	fixed, price, _ := p.planOf(pt.key, "fixed") // request 1
	for range 2 {                                // requests 2 and 3
		if r := pt.order("", orderBody(fixed, "")); r.status != http.StatusCreated {
			t.Fatalf("order without a key: %d %s", r.status, r.body)
		}
	}
	before := pt.balance() // request 4
	r := pt.order("", orderBody(fixed, ""))
	p.expectError(r, http.StatusTooManyRequests, "rate_limited")
	if r.header.Get("Retry-After") != "60" {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if before != 1000_00-2*price {
		t.Errorf("balance %d, want two orders charged", before)
	}
	pt.checkMoney()
}

// TestConcurrentRetriesOfOneOrderChargeOnce: 50 requests at once with one
// Idempotency-Key and body make one order: one 201, 49 replays with the
// header and the very same body, one debit.
func TestConcurrentRetriesOfOneOrderChargeOnce(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("GBP", sandbox, 100_00)
	fixed, price, _ := p.planOf(pt.key, "fixed")
	body := orderBody(fixed, `"quantity":2,"customer":{"reference":"retry-storm"}`)

	answers := make([]response, 50)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = pt.order("storm-key", body) })
	}
	wg.Wait()
	created, replayed := 0, 0
	var first []byte
	for _, r := range answers {
		switch {
		case r.status == http.StatusCreated && r.header.Get("Idempotent-Replay") == "":
			created++
		case r.status == http.StatusOK && r.header.Get("Idempotent-Replay") == "true":
			replayed++
		default:
			t.Fatalf("answer %d %v %s", r.status, r.header, r.body)
		}
		if first == nil {
			first = r.body
		} else if !bytes.Equal(first, r.body) {
			t.Fatalf("bodies differ:\n%s\n%s", first, r.body)
		}
	}
	if created != 1 || replayed != 49 {
		t.Fatalf("%d created and %d replayed, want 1 and 49", created, replayed)
	}
	if got := pt.balance(); got != 100_00-2*price {
		t.Errorf("balance %d, want one charge of %d", got, 2*price)
	}
	if l := pt.orders(""); l.Pagination.Total != 1 {
		t.Errorf("%d orders, want 1", l.Pagination.Total)
	}

	// The same key with another body is refused, and charges nothing.
	e := p.expectError(pt.order("storm-key", orderBody(fixed, `"quantity":3`)), http.StatusBadRequest, "invalid_request")
	if got := detailFields(e); !slices.Equal(got, []string{"Idempotency-Key"}) {
		t.Errorf("details %v, want Idempotency-Key", got)
	}
	if got := pt.balance(); got != 100_00-2*price {
		t.Errorf("balance %d after a reused key, want unchanged", got)
	}
	pt.checkMoney()
}

// TestInsufficientFundsStoresNothing: a 402 keeps neither money nor the
// key, so after a top-up the same key goes through.
func TestInsufficientFundsStoresNothing(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("USD", sandbox, 1)
	fixed, price, _ := p.planOf(pt.key, "fixed")
	body := orderBody(fixed, `"quantity":2`)
	p.expectError(pt.order("short", body), http.StatusPaymentRequired, "insufficient_funds")
	if got := pt.balance(); got != 1 {
		t.Fatalf("balance %d after a 402, want 1", got)
	}
	if l := pt.orders(""); l.Pagination.Total != 0 {
		t.Fatalf("%d orders after a 402, want none", l.Pagination.Total)
	}
	pt.topUp(2*price - 1)
	if r := pt.order("short", body); r.status != http.StatusCreated {
		t.Fatalf("after a top-up, the same key: %d %s", r.status, r.body)
	}
	if got := pt.balance(); got != 0 {
		t.Errorf("balance %d, want 0", got)
	}
	pt.checkMoney()
}

// TestConcurrentOrdersNeverOverdraw: 200 orders at once against a balance
// for exactly 100 of them: 100 completed, 100 refused, the balance 0.
func TestConcurrentOrdersNeverOverdraw(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("USD", sandbox, 0)
	fixed, price, _ := p.planOf(pt.key, "fixed")
	pt.topUp(100 * price)
	statuses := make([]int, 200)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			r := pt.order(fmt.Sprintf("order-%d", i), orderBody(fixed, ""))
			statuses[i] = r.status
			if r.status != http.StatusCreated && r.status != http.StatusPaymentRequired {
				t.Errorf("order %d: %d %s", i, r.status, r.body)
			}
		})
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		if s == http.StatusCreated {
			created++
		}
	}
	if created != 100 {
		t.Errorf("%d orders created, want exactly 100", created)
	}
	if got := pt.balance(); got != 0 {
		t.Errorf("balance %d, want 0", got)
	}
	if l := pt.orders("status=completed"); l.Pagination.Total != 100 {
		t.Errorf("%d completed orders, want 100", l.Pagination.Total)
	}
	pt.checkMoney()
}

// TestProviderFailureRefundsAndReplays: the sandbox trigger and a live key
// with no provider each answer 502 provider_error, keep a failed order
// with its error, refund it in full, and replay the same 502.
func TestProviderFailureRefundsAndReplays(t *testing.T) {
	p := start(t, options{})
	for _, tc := range []struct {
		name string
		env  accountsv1.Environment
		body func(plan string) string
	}{
		{"sandbox trigger", sandbox, func(plan string) string {
			return orderBody(plan, `"customer":{"reference":"sandbox:provider_error"}`)
		}},
		{"live without a provider", live, func(plan string) string { return orderBody(plan, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt := p.partner("USD", tc.env, 80_00)
			fixed, _, _ := p.planOf(pt.key, "fixed")
			first := pt.order("failing", tc.body(fixed))
			e := p.expectError(first, http.StatusBadGateway, "provider_error")
			if pt.balance() != 80_00 {
				t.Errorf("balance %d after a provider failure, want 8000 (refunded)", pt.balance())
			}
			failed := pt.orders("status=failed")
			if len(failed.Data) != 1 || failed.Data[0].Error == nil || failed.Data[0].Error.Code != "provider_error" ||
				failed.Data[0].Error.Message == "" || len(failed.Data[0].Esims) != 0 || !strings.Contains(e.Error.Message, failed.Data[0].ID) {
				t.Fatalf("failed orders %+v; the 502 said %q", failed.Data, e.Error.Message)
			}
			replay := pt.order("failing", tc.body(fixed))
			re := p.expectError(replay, http.StatusBadGateway, "provider_error")
			if replay.header.Get("Idempotent-Replay") != "true" || re.Error.Message != e.Error.Message {
				t.Errorf("replay: header %q, message %q; want true and %q", replay.header.Get("Idempotent-Replay"), re.Error.Message, e.Error.Message)
			}
			if pt.balance() != 80_00 {
				t.Errorf("balance %d after a replayed failure, want 8000", pt.balance())
			}
			pt.checkMoney()
		})
	}
}

// TestOrdersAreSeenOnlyByTheirAccountAndEnvironment: a sandbox order is not
// found with the same account's live key, nor with another account's key;
// balances are per environment.
func TestOrdersAreSeenOnlyByTheirAccountAndEnvironment(t *testing.T) {
	p := start(t, options{})
	owner := p.partner("USD", sandbox, 100_00)
	fixed, _, _ := p.planOf(owner.key, "fixed")
	r := owner.order("mine", orderBody(fixed, ""))
	var o struct{ Data orderJSON }
	r.json(t, &o)
	liveKey, err := p.accounts.CreateKey(t.Context(), &accountsv1.CreateKeyRequest{AccountId: owner.accountID, Environment: live})
	if err != nil {
		t.Fatal(err)
	}
	ownLive := partner{p: p, accountID: owner.accountID, key: liveKey.GetSecret(), env: live, currency: "USD"}
	other := p.partner("USD", sandbox, 0)
	for _, pt := range []partner{ownLive, other} {
		for _, path := range []string{"/v1/orders/" + o.Data.ID, "/v1/esims/" + o.Data.Esims[0].ID} {
			p.expectError(p.get(path, bearer(pt.key)), http.StatusNotFound, "not_found")
		}
		if l := pt.orders(""); l.Pagination.Total != 0 {
			t.Errorf("%s %s sees %d orders, want none", pt.accountID, pt.env.ShortName(), l.Pagination.Total)
		}
		var esims struct{ Data []esimJSON }
		p.get("/v1/esims?order_id="+o.Data.ID, bearer(pt.key)).json(t, &esims)
		if len(esims.Data) != 0 {
			t.Errorf("another scope lists the order's eSIMs: %+v", esims.Data)
		}
	}
	if ownLive.balance() != 0 {
		t.Errorf("live balance %d, want 0: the sandbox top-up is the sandbox's", ownLive.balance())
	}
	for _, path := range []string{"/v1/orders/nope", "/v1/esims/{" + o.Data.Esims[0].ID + "}", "/v1/orders/" + uuid.NewString()} {
		p.expectError(p.get(path, bearer(owner.key)), http.StatusNotFound, "not_found")
	}
	e := p.expectError(p.get("/v1/esims?status=LOST", bearer(owner.key)), http.StatusBadRequest, "invalid_request")
	if got := detailFields(e); !slices.Equal(got, []string{"status"}) {
		t.Errorf("details %v", got)
	}
	e = p.expectError(p.get("/v1/esims?order_id=x&iccid=12", bearer(owner.key)), http.StatusBadRequest, "invalid_request")
	if got := detailFields(e); !slices.Equal(got, []string{"iccid", "order_id"}) {
		t.Errorf("details %v", got)
	}
	// A QR link is the only key to its image: a wrong token is not found.
	for _, path := range []string{"/qr/" + strings.Repeat("A", 43) + ".png", "/qr/short.png", "/qr/" + strings.Repeat("A", 43)} {
		resp, err := http.Get(p.gateway + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}
