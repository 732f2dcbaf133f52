package web

import (
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"

	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/portal"
)

// maxQueryLength bounds the search box: the longest thing it finds is an
// email (254 characters).
const maxQueryLength = 254

type searchData struct {
	Query  string
	Orders []*orderingv1.Order
	Esims  []*orderingv1.Esim
	TopUps []*orderingv1.TopUp
	Events []*webhookv1.Event
	// EventsOf is the order whose events are listed, EventsTotal how
	// many it has in all.
	EventsOf    string
	EventsTotal int64
	// More is set when there were more orders or eSIMs than shown.
	More bool
}

// Found reports whether anything matched.
func (d searchData) Found() bool { return len(d.Orders)+len(d.Esims)+len(d.TopUps)+len(d.Events) > 0 }

// search is the header's search box: an order by its id, reference or
// customer email (their start), an eSIM by its id or ICCID (its start),
// an event by its id, and the events of an order by the order's id; the
// signed-in account's, in the page's environment, only.
func (a *App) search(w http.ResponseWriter, r *http.Request, e envRequest) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	v := envView(e, "Search", "search", nil)
	v.SearchQuery = q
	data := searchData{Query: q}
	v.Data = &data
	if q == "" {
		a.render(w, r, http.StatusOK, "search.html", v)
		return
	}
	if len(q) > maxQueryLength {
		a.errorPage(w, r, http.StatusBadRequest, "Bad request", "A search is at most 254 characters: an id, an ICCID, an email or a reference.")
		return
	}
	ctx := r.Context()
	if strings.HasPrefix(q, "evt_") {
		ev, err := a.Webhook.GetEvent(ctx, &webhookv1.GetEventRequest{Id: q, Scope: e.hookScope()})
		switch c := code(err); {
		case err == nil:
			data.Events = append(data.Events, ev)
		case c != twirp.NotFound && c != twirp.InvalidArgument:
			a.fail(w, r, err)
			return
		}
		a.render(w, r, http.StatusOK, "search.html", v)
		return
	}
	res, err := a.Ordering.Search(ctx, &orderingv1.SearchRequest{Scope: e.orderScope(), Query: q, Limit: portal.PageSize})
	if err != nil {
		if code(err) == twirp.InvalidArgument {
			a.errorPage(w, r, http.StatusBadRequest, "Bad request", "Search for an order or eSIM id, an ICCID, a customer email or a reference, in printable characters.")
			return
		}
		a.fail(w, r, err)
		return
	}
	data.Orders, data.Esims, data.TopUps, data.More = res.GetOrders(), res.GetEsims(), res.GetTopups(), res.GetMore()
	// An order's id finds its events too.
	if _, err := uuid.Parse(q); err == nil && len(data.Orders) == 1 && data.Orders[0].GetId() == q {
		evs, err := a.Webhook.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: e.hookScope(), OrderId: q, Limit: portal.PageSize})
		if err != nil {
			a.fail(w, r, err)
			return
		}
		data.Events, data.EventsOf, data.EventsTotal = evs.GetEvents(), q, evs.GetTotal()
	}
	a.render(w, r, http.StatusOK, "search.html", v)
}
