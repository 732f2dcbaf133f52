package web

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/money"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/proto/limits"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/portal"
)

func (e envRequest) orderScope() *orderingv1.Scope {
	return &orderingv1.Scope{AccountId: e.accountID(), Environment: e.proto()}
}

func (e envRequest) hookScope() *webhookv1.Scope {
	return &webhookv1.Scope{AccountId: e.accountID(), Environment: e.proto()}
}

// pageParam reads ?page=, 1 when absent; ok is false for anything but a
// number from 1 to portal.MaxPage.
func pageParam(r *http.Request) (int, bool) {
	raw := r.URL.Query().Get("page")
	if raw == "" {
		return 1, true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > portal.MaxPage || strconv.Itoa(n) != raw {
		return 0, false
	}
	return n, true
}

// pager links the pages of a list.
type pager struct {
	Page, Pages int
	Total       int64
	Prev, Next  string
	// Past is set on a page after the last (a link kept from when there
	// were more): Last leads back.
	Past bool
	Last string
}

func newPager(base string, page int, total int64, keep ...string) pager {
	pages := int((total + portal.PageSize - 1) / portal.PageSize)
	p := pager{Page: page, Pages: max(pages, 1), Total: total}
	if page > 1 {
		p.Prev = base + query(append(keep, "page", strconv.Itoa(page-1))...)
	}
	if page < pages {
		p.Next = base + query(append(keep, "page", strconv.Itoa(page+1))...)
	}
	if page > p.Pages {
		p.Past, p.Prev = true, ""
		p.Last = base + query(append(keep, "page", strconv.Itoa(p.Pages))...)
	}
	return p
}

func (a *App) badPage(w http.ResponseWriter, r *http.Request) {
	a.errorPage(w, r, http.StatusBadRequest, "Bad request", "page must be a whole number from 1 to 10000.")
}

// --- overview

type overviewData struct {
	Balance  *walletv1.Balance
	Orders   []*orderingv1.Order
	Failures []*webhookv1.Event
	APIURL   string
	KeyHint  string
}

func (a *App) overview(w http.ResponseWriter, r *http.Request, e envRequest) {
	ctx := r.Context()
	bal, err := a.Wallet.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: e.accountID(), Environment: e.proto(), Currency: e.currency()})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	orders, err := a.Ordering.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: e.orderScope(), Limit: portal.RecentOrders})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	failed, err := a.Webhook.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: e.hookScope(), Status: webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED, Limit: portal.RecentFailures})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "overview.html", envView(e, "Overview", "", overviewData{
		Balance: bal, Orders: orders.GetOrders(), Failures: failed.GetEvents(), APIURL: a.PublicAPIURL, KeyHint: "sk_" + string(e.env) + "_...",
	}))
}

// --- API keys

type keysData struct {
	Keys []*accountsv1.ApiKey
}

// envKeys lists every key of the account in e's environment, newest first.
func (a *App) envKeys(r *http.Request, e envRequest) ([]*accountsv1.ApiKey, error) {
	var keys []*accountsv1.ApiKey
	for page := int32(1); ; page++ {
		res, err := a.Accounts.ListKeys(r.Context(), &accountsv1.ListKeysRequest{AccountId: e.accountID(), Page: page, Limit: 100})
		if err != nil {
			return nil, err
		}
		for _, k := range res.GetKeys() {
			if k.GetEnvironment() == e.proto() {
				keys = append(keys, k)
			}
		}
		if len(res.GetKeys()) == 0 || int(page)*100 >= int(res.GetTotal()) || page >= portal.MaxPage {
			return keys, nil
		}
	}
}

func (a *App) keysPage(w http.ResponseWriter, r *http.Request, e envRequest, status int, v func(*view)) {
	keys, err := a.envKeys(r, e)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page := envView(e, "API keys", "keys", keysData{Keys: keys})
	page.Errors = map[string]string{}
	if v != nil {
		v(&page)
	}
	a.render(w, r, status, "keys.html", page)
}

func (a *App) keys(w http.ResponseWriter, r *http.Request, e envRequest) {
	a.keysPage(w, r, e, http.StatusOK, func(v *view) {
		switch r.URL.Query().Get("done") {
		case "revoked":
			v.Notice = "The key was revoked: the API refuses it within a few seconds."
		case "shown":
			v.Notice = "A new key's secret is shown only once. If you did not copy it, create another key and revoke the one you lost."
		}
	})
}

func (a *App) createKey(w http.ResponseWriter, r *http.Request, e envRequest) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	res, err := a.Accounts.CreateKey(r.Context(), &accountsv1.CreateKeyRequest{AccountId: e.accountID(), Environment: e.proto(), Name: name})
	if err != nil {
		if field, msg, ok := fieldError(err, map[string]string{"name": "Name"}); ok {
			a.keysPage(w, r, e, http.StatusBadRequest, func(v *view) { v.Errors[field] = msg; v.Form = map[string]string{"name": name} })
			return
		}
		if code(err) == twirp.FailedPrecondition && meta(err, "reason") == "live_disabled" {
			a.keysPage(w, r, e, http.StatusForbidden, func(v *view) {
				v.Error = "Live keys can be created once live is enabled for this account: request live access at /live/access."
			})
			return
		}
		a.fail(w, r, err)
		return
	}
	// Post/Redirect/Get: the secret is shown by the page this redirects
	// to, once, so that reloading what the browser shows never sends the
	// form again and makes a second key. If the secret cannot be kept
	// for that page the key exists unseen: the list shows it, to revoke.
	id := portal.NewKeyID()
	sealed, key, err := portal.SealNewKey(portal.NewKey{Name: res.GetKey().GetName(), Secret: res.GetSecret()}, newKeyBinding(e, id))
	if err == nil {
		err = a.NewKeys.Put(r.Context(), id, sealed, portal.NewKeyTTL)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page := newKeyPath(e, id)
	http.SetCookie(w, &http.Cookie{
		Name: NewKeyCookie, Value: base64.RawURLEncoding.EncodeToString(key), Path: page, MaxAge: int(portal.NewKeyTTL.Seconds()),
		HttpOnly: true, Secure: a.SecureCookies, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, page, http.StatusSeeOther)
}

// NewKeyCookie holds the key that opens a new API key's sealed secret,
// scoped to that key's page alone.
const NewKeyCookie = "esim_new_key"

func newKeyPath(e envRequest, id string) string { return "/" + string(e.env) + "/new-key/" + id }

// newKeyBinding ties a sealed new key to the account, environment and
// page it was made for: another account's session cannot open it, even
// with the cookie.
func newKeyBinding(e envRequest, id string) string {
	return "portal new key\x00" + e.accountID() + "\x00" + string(e.env) + "\x00" + id
}

type newKeyData struct{ Name, Secret string }

// keyCreated shows a new key's secret, once: the cookie is cleared and
// the sealed secret taken out of Redis as it is shown. Without either
// (a reload, another browser, too late) it sends to the keys page, which
// says the secret was shown already.
func (a *App) keyCreated(w http.ResponseWriter, r *http.Request, e envRequest) {
	id := r.PathValue("id")
	if !portal.ValidNewKeyID(id) {
		a.notFound(w, r)
		return
	}
	page := newKeyPath(e, id)
	http.SetCookie(w, &http.Cookie{
		Name: NewKeyCookie, Value: "", Path: page, MaxAge: -1,
		HttpOnly: true, Secure: a.SecureCookies, SameSite: http.SameSiteStrictMode,
	})
	shown := func() { http.Redirect(w, r, "/"+string(e.env)+"/keys?done=shown", http.StatusSeeOther) }
	c, err := r.Cookie(NewKeyCookie)
	if err != nil {
		shown()
		return
	}
	key, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		shown()
		return
	}
	sealed, err := a.NewKeys.Take(r.Context(), id)
	if errors.Is(err, portal.ErrNotFound) {
		shown()
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	k, err := portal.OpenNewKey(sealed, key, newKeyBinding(e, id))
	if err != nil {
		// Another account's page, or a cookie not made here.
		shown()
		return
	}
	a.render(w, r, http.StatusOK, "key_created.html", envView(e, "Your new API key", "keys", newKeyData{Name: k.Name, Secret: k.Secret}))
}

// envKey finds key id of the account in e's environment.
func (a *App) envKey(r *http.Request, e envRequest, id string) (*accountsv1.ApiKey, error) {
	keys, err := a.envKeys(r, e)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.GetId() == id {
			return k, nil
		}
	}
	return nil, twirp.NotFoundError("key")
}

func (a *App) revokePage(w http.ResponseWriter, r *http.Request, e envRequest) {
	k, err := a.envKey(r, e, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "revoke.html", envView(e, "Revoke key", "keys", k))
}

func (a *App) revokeKey(w http.ResponseWriter, r *http.Request, e envRequest) {
	k, err := a.envKey(r, e, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if k.GetRevokedAt() == nil {
		if _, err := a.Accounts.RevokeKey(r.Context(), &accountsv1.RevokeKeyRequest{AccountId: e.accountID(), KeyId: k.GetId()}); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	http.Redirect(w, r, "/"+string(e.env)+"/keys?done=revoked", http.StatusSeeOther)
}

// --- webhooks

type webhooksData struct {
	Endpoint *webhookv1.Endpoint
	// ConfirmRotation asks before a rotation that would end the previous
	// secret's overlap early.
	ConfirmRotation bool
	// Secret is set when the partner asked to see it.
	Secret string
}

func (a *App) webhooksPage(w http.ResponseWriter, r *http.Request, e envRequest, status int, edit func(*view, *webhooksData)) {
	ep, err := a.Webhook.GetEndpoint(r.Context(), &webhookv1.GetEndpointRequest{Scope: e.hookScope()})
	if err != nil && code(err) != twirp.NotFound {
		a.fail(w, r, err)
		return
	}
	data := &webhooksData{Endpoint: ep}
	v := envView(e, "Webhooks", "webhooks", nil)
	v.Errors = map[string]string{}
	v.Form = map[string]string{"url": ep.GetUrl()}
	switch r.URL.Query().Get("done") {
	case "saved":
		v.Notice = "Endpoint saved."
	case "rotated":
		v.Notice = "Signing secret rotated. The previous one keeps signing beside it for 24 hours."
	}
	if edit != nil {
		edit(&v, data)
	}
	v.Data = data
	a.render(w, r, status, "webhooks.html", v)
}

func (a *App) webhooks(w http.ResponseWriter, r *http.Request, e envRequest) {
	a.webhooksPage(w, r, e, http.StatusOK, nil)
}

func (a *App) setEndpoint(w http.ResponseWriter, r *http.Request, e envRequest) {
	u := strings.TrimSpace(r.PostFormValue("url"))
	if _, err := a.Webhook.SetEndpoint(r.Context(), &webhookv1.SetEndpointRequest{Scope: e.hookScope(), Url: u}); err != nil {
		if field, msg, ok := fieldError(err, map[string]string{"url": "URL"}); ok {
			a.webhooksPage(w, r, e, http.StatusBadRequest, func(v *view, _ *webhooksData) { v.Errors[field] = msg; v.Form["url"] = u })
			return
		}
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/"+string(e.env)+"/webhooks?done=saved", http.StatusSeeOther)
}

func (a *App) revealSecret(w http.ResponseWriter, r *http.Request, e envRequest) {
	a.webhooksPage(w, r, e, http.StatusOK, func(v *view, d *webhooksData) {
		if d.Endpoint == nil {
			v.Error = "Set an endpoint URL first: the signing secret is made with it."
			return
		}
		d.Secret = d.Endpoint.GetSecret()
	})
}

func (a *App) rotateSecret(w http.ResponseWriter, r *http.Request, e envRequest) {
	if r.PostFormValue("confirm") != "yes" {
		ep, err := a.Webhook.GetEndpoint(r.Context(), &webhookv1.GetEndpointRequest{Scope: e.hookScope()})
		if err != nil && code(err) != twirp.NotFound {
			a.fail(w, r, err)
			return
		}
		if until := ep.GetPreviousSecretExpiresAt(); until != nil && until.AsTime().After(time.Now()) {
			// Rotating again in the overlap ends the previous secret at
			// once: a receiver still on it would fail every delivery.
			a.webhooksPage(w, r, e, http.StatusOK, func(_ *view, d *webhooksData) { d.ConfirmRotation = true })
			return
		}
	}
	if _, err := a.Webhook.RotateSecret(r.Context(), &webhookv1.RotateSecretRequest{Scope: e.hookScope()}); err != nil {
		if code(err) == twirp.NotFound {
			a.webhooksPage(w, r, e, http.StatusConflict, func(v *view, _ *webhooksData) { v.Error = "Set an endpoint URL first." })
			return
		}
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/"+string(e.env)+"/webhooks?done=rotated", http.StatusSeeOther)
}

func (a *App) sendTestEvent(w http.ResponseWriter, r *http.Request, e envRequest) {
	if _, err := a.Webhook.SendTestEvent(r.Context(), &webhookv1.SendTestEventRequest{Scope: e.hookScope()}); err != nil {
		if code(err) == twirp.NotFound {
			a.webhooksPage(w, r, e, http.StatusConflict, func(v *view, _ *webhooksData) { v.Error = "Set an endpoint URL first: the test event is sent to it." })
			return
		}
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/"+string(e.env)+"/events?done=test", http.StatusSeeOther)
}

// --- events

var (
	eventStatuses = []string{"pending", "delivered", "failed", "no_endpoint"}
	// eventTypes are every type the platform sends, as the API's event
	// filter takes them.
	eventTypes = limits.EventTypes
)

type eventsData struct {
	Events       []*webhookv1.Event
	Pager        pager
	Status, Type string
	// Order is the order whose events are listed, "" for all.
	Order           string
	Statuses, Types []string
}

func (a *App) events(w http.ResponseWriter, r *http.Request, e envRequest) {
	q := r.URL.Query()
	page, ok := pageParam(r)
	if !ok {
		a.badPage(w, r)
		return
	}
	status, typ, order := q.Get("status"), q.Get("type"), q.Get("order")
	if order != "" {
		if _, err := uuid.Parse(order); err != nil || len(order) != 36 {
			a.errorPage(w, r, http.StatusBadRequest, "Bad request", "order must be an order's id.")
			return
		}
	}
	var st webhookv1.DeliveryStatus
	if status != "" {
		v, known := webhookv1.DeliveryStatus_value["DELIVERY_STATUS_"+strings.ToUpper(status)]
		if !known || !contains(eventStatuses, status) {
			a.errorPage(w, r, http.StatusBadRequest, "Bad request", "status must be one of pending, delivered, failed or no_endpoint.")
			return
		}
		st = webhookv1.DeliveryStatus(v)
	}
	if typ != "" && !contains(eventTypes, typ) {
		a.errorPage(w, r, http.StatusBadRequest, "Bad request", "type must be one of "+strings.Join(eventTypes[:len(eventTypes)-1], ", ")+" or "+eventTypes[len(eventTypes)-1]+".")
		return
	}
	res, err := a.Webhook.ListEvents(r.Context(), &webhookv1.ListEventsRequest{Scope: e.hookScope(), Type: typ, Status: st, OrderId: order, Page: int32(page), Limit: portal.PageSize})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	title := "Events"
	if order != "" {
		title = "Events of order " + shortID(order)
	}
	v := envView(e, title, "events", eventsData{
		Events: res.GetEvents(), Status: status, Type: typ, Order: order, Statuses: eventStatuses, Types: eventTypes,
		Pager: newPager("/"+string(e.env)+"/events", page, res.GetTotal(), "status", status, "type", typ, "order", order),
	})
	if q.Get("done") == "test" {
		v.Notice = "Test event sent: a ping is on its way to your endpoint. Its delivery shows below within seconds."
	}
	a.render(w, r, http.StatusOK, "events.html", v)
}

func (a *App) event(w http.ResponseWriter, r *http.Request, e envRequest) {
	ev, err := a.Webhook.GetEvent(r.Context(), &webhookv1.GetEventRequest{Id: r.PathValue("id"), Scope: e.hookScope()})
	if err != nil {
		if code(err) == twirp.InvalidArgument {
			err = twirp.NotFoundError("event")
		}
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "event.html", envView(e, "Event "+shortID(ev.GetId()), "events", eventData{Event: ev, EsimID: esimOf(ev)}))
}

type eventData struct {
	*webhookv1.Event
	// EsimID is the eSIM an esim.* or topup.* event is about.
	EsimID string
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// --- orders

var orderStatuses = []string{"pending", "completed", "failed"}

type ordersData struct {
	Orders            []*orderingv1.Order
	Pager             pager
	Status, Reference string
	Statuses          []string
}

func (a *App) orders(w http.ResponseWriter, r *http.Request, e envRequest) {
	q := r.URL.Query()
	page, ok := pageParam(r)
	if !ok {
		a.badPage(w, r)
		return
	}
	status, reference := q.Get("status"), strings.TrimSpace(q.Get("reference"))
	var st orderingv1.OrderStatus
	if status != "" {
		if !contains(orderStatuses, status) {
			a.errorPage(w, r, http.StatusBadRequest, "Bad request", "status must be one of pending, completed or failed.")
			return
		}
		st = orderingv1.OrderStatus(orderingv1.OrderStatus_value["ORDER_STATUS_"+strings.ToUpper(status)])
	}
	res, err := a.Ordering.ListOrders(r.Context(), &orderingv1.ListOrdersRequest{Scope: e.orderScope(), Status: st, Reference: reference, Page: int32(page), Limit: portal.PageSize})
	if err != nil {
		if code(err) == twirp.InvalidArgument {
			a.errorPage(w, r, http.StatusBadRequest, "Bad request", "The reference is too long or not valid text.")
			return
		}
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "orders.html", envView(e, "Orders", "orders", ordersData{
		Orders: res.GetOrders(), Status: status, Reference: reference, Statuses: orderStatuses,
		Pager: newPager("/"+string(e.env)+"/orders", page, int64(res.GetTotal()), "status", status, "reference", reference),
	}))
}

func (a *App) order(w http.ResponseWriter, r *http.Request, e envRequest) {
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil {
		a.notFound(w, r)
		return
	}
	o, err := a.Ordering.GetOrder(r.Context(), &orderingv1.GetOrderRequest{Id: id, Scope: e.orderScope()})
	if code(err) == twirp.NotFound {
		// A wallet entry names an order or a top-up by its id: a top-up
		// is shown on its eSIM's page.
		found, serr := a.Ordering.Search(r.Context(), &orderingv1.SearchRequest{Scope: e.orderScope(), Query: id, Limit: 1})
		if serr == nil && len(found.GetTopups()) == 1 {
			t := found.GetTopups()[0]
			http.Redirect(w, r, "/"+string(e.env)+"/esims/"+t.GetEsimId()+"#topup-"+t.GetId(), http.StatusSeeOther)
			return
		}
		if serr != nil {
			err = serr
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "order.html", envView(e, "Order "+shortID(o.GetId()), "orders", o))
}

// --- balance

type balanceData struct {
	Balance  *walletv1.Balance
	Entries  []*walletv1.LedgerEntry
	Pager    pager
	TopUp    bool
	MaxTopUp string
}

func (a *App) balancePage(w http.ResponseWriter, r *http.Request, e envRequest, status int, edit func(*view)) {
	page, ok := pageParam(r)
	if !ok {
		a.badPage(w, r)
		return
	}
	ctx := r.Context()
	bal, err := a.Wallet.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: e.accountID(), Environment: e.proto(), Currency: e.currency()})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ledger, err := a.Wallet.ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: e.accountID(), Environment: e.proto(), Page: int32(page), Limit: portal.PageSize})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v := envView(e, "Balance", "balance", balanceData{
		Balance: bal, Entries: ledger.GetEntries(), TopUp: e.env == portal.Sandbox, MaxTopUp: formatAmount(portal.MaxSandboxTopUpMinor, ""),
		Pager: newPager("/"+string(e.env)+"/balance", page, int64(ledger.GetTotal())),
	})
	v.Errors = map[string]string{}
	if r.URL.Query().Get("done") == "topup" {
		v.Notice = "Your sandbox balance was topped up."
	}
	if edit != nil {
		edit(&v)
	}
	a.render(w, r, status, "balance.html", v)
}

func (a *App) balance(w http.ResponseWriter, r *http.Request, e envRequest) {
	a.balancePage(w, r, e, http.StatusOK, nil)
}

func (a *App) topUp(w http.ResponseWriter, r *http.Request, e envRequest) {
	raw := strings.TrimSpace(r.PostFormValue("amount"))
	amount, err := money.ParseDecimal(raw)
	if err != nil || amount <= 0 || amount > portal.MaxSandboxTopUpMinor {
		a.balancePage(w, r, e, http.StatusBadRequest, func(v *view) {
			v.Errors["amount"] = "Amount must be from 0.01 to " + formatAmount(portal.MaxSandboxTopUpMinor, "") + ", with at most two decimals."
			v.Form = map[string]string{"amount": raw}
		})
		return
	}
	ref, err := uuid.NewV7()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	_, err = a.Wallet.TopUp(r.Context(), &walletv1.TopUpRequest{
		AccountId: e.accountID(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Currency: e.currency(),
		AmountMinor: amount, Reference: "portal-topup-" + ref.String(), Note: "Sandbox top-up in the portal by " + e.GetUser().GetEmail(),
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/sandbox/balance?done=topup", http.StatusSeeOther)
}
