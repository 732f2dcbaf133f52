package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/proto/limits"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/portal"
)

// esimStatuses are the eSIM's statuses as the API spells them, in the
// order an eSIM moves through them.
var esimStatuses = []string{"ALLOCATED", "INSTALLED", "ACTIVE", "DEPLETED", "EXPIRED"}

// maxICCIDLength is the longest ICCID (ITU-T E.118), ordering's bound too.
const maxICCIDLength = 22

type esimsData struct {
	Esims         []*orderingv1.Esim
	Pager         pager
	Status, ICCID string
	Statuses      []string
}

func (a *App) esims(w http.ResponseWriter, r *http.Request, e envRequest) {
	q := r.URL.Query()
	page, ok := pageParam(r)
	if !ok {
		a.badPage(w, r)
		return
	}
	status := strings.ToUpper(strings.TrimSpace(q.Get("status")))
	if status != "" && !slices.Contains(esimStatuses, status) {
		a.errorPage(w, r, http.StatusBadRequest, "Bad request", "status must be one of ALLOCATED, INSTALLED, ACTIVE, DEPLETED or EXPIRED.")
		return
	}
	// ICCIDs are often printed in groups of four: a pasted one keeps its
	// spaces.
	iccid := strings.Join(strings.Fields(q.Get("iccid")), "")
	if len(iccid) > maxICCIDLength || strings.ContainsFunc(iccid, func(c rune) bool { return c < '0' || c > '9' }) {
		a.errorPage(w, r, http.StatusBadRequest, "Bad request", "An ICCID is digits only, at most 22 of them.")
		return
	}
	res, err := a.Ordering.ListEsims(r.Context(), &orderingv1.ListEsimsRequest{
		Scope: e.orderScope(), Status: status, Iccid: iccid, Page: int32(page), Limit: portal.PageSize,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "esims.html", envView(e, "eSIMs", "esims", esimsData{
		Esims: res.GetEsims(), Status: status, ICCID: iccid, Statuses: esimStatuses,
		Pager: newPager("/"+string(e.env)+"/esims", page, int64(res.GetTotal()), "status", status, "iccid", iccid),
	}))
}

type esimData struct {
	Esim     *orderingv1.Esim
	Timeline []step
	Usage    usage
	Events   []esimEvent
	// EventsCut is set when the eSIM's order has more events than were
	// searched for this eSIM's.
	EventsCut bool
}

// step is one moment of an eSIM's life: done ones with their time,
// those still to come without (but for a known expiry).
type step struct {
	Label  string
	At     *timestamppb.Timestamp
	Done   bool
	Detail string
	// TopUp is set on a top-up's step.
	TopUp *orderingv1.TopUp
}

type usage struct {
	Unlimited              bool
	Used, Total, Remaining int64
	Percent                int64
	UpdatedAt              *timestamppb.Timestamp
}

// esimEvent is an event about the eSIM, with what its envelope adds.
type esimEvent struct {
	*webhookv1.Event
	ThresholdPercent int
}

// maxEventPages bounds the pages of the order's events searched for the
// eSIM's: an order of 50 eSIMs with a life each fits.
const maxEventPages = 10

func (a *App) esim(w http.ResponseWriter, r *http.Request, e envRequest) {
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil {
		a.notFound(w, r)
		return
	}
	es, err := a.Ordering.GetEsim(r.Context(), &orderingv1.GetEsimRequest{Id: id, Scope: e.orderScope()})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	events, cut, err := a.esimEvents(r, e, es)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "esim.html", envView(e, "eSIM "+es.GetIccid(), "esims", esimData{
		Esim: es, Timeline: timeline(es, events), Usage: usageOf(es), Events: events, EventsCut: cut,
	}))
}

// esimEvents are the events of the eSIM's order that are about the eSIM,
// newest first. Webhook files esim.* and topup.* events under the eSIM's
// order, beside the order's own; what each is about is in its payload.
func (a *App) esimEvents(r *http.Request, e envRequest, es *orderingv1.Esim) ([]esimEvent, bool, error) {
	var out []esimEvent
	for page := int32(1); page <= maxEventPages; page++ {
		res, err := a.Webhook.ListEvents(r.Context(), &webhookv1.ListEventsRequest{
			Scope: e.hookScope(), OrderId: es.GetOrderId(), Page: page, Limit: 100,
		})
		if err != nil {
			return nil, false, err
		}
		for _, ev := range res.GetEvents() {
			if threshold, about := aboutEsim(ev, es.GetId()); about {
				out = append(out, esimEvent{Event: ev, ThresholdPercent: threshold})
			}
		}
		if len(res.GetEvents()) == 0 || int64(page)*100 >= res.GetTotal() {
			return out, false, nil
		}
	}
	return out, true, nil
}

type idOnly struct {
	ID string `json:"id"`
}

// payload is what an event's body says of what it is about.
type payload struct {
	ThresholdPercent int `json:"threshold_percent"`
	Data             struct {
		ID     string   `json:"id"`
		EsimID string   `json:"esim_id"`
		Esims  []idOnly `json:"esims"`
	} `json:"data"`
}

// aboutEsim says whether ev is about eSIM id: an esim.* event's data is
// the eSIM, a topup.*'s the top-up (naming its eSIM) and an order.*'s the
// order (listing its eSIMs). An event whose data tells nothing stays: it
// is of the eSIM's order.
func aboutEsim(ev *webhookv1.Event, id string) (threshold int, about bool) {
	var p payload
	if err := json.Unmarshal([]byte(ev.GetPayload()), &p); err != nil {
		return 0, true
	}
	switch typ := ev.GetType(); {
	case strings.HasPrefix(typ, "esim."):
		return p.ThresholdPercent, p.Data.ID == "" || p.Data.ID == id
	case strings.HasPrefix(typ, "topup."):
		return 0, p.Data.EsimID == "" || p.Data.EsimID == id
	case typ == limits.EventOrderCompleted:
		return 0, slices.Contains(p.Data.Esims, idOnly{ID: id})
	}
	return 0, true
}

// esimOf is the eSIM an esim.* or topup.* event is about, as its data
// names it; "" for any other event.
func esimOf(ev *webhookv1.Event) string {
	var p payload
	if err := json.Unmarshal([]byte(ev.GetPayload()), &p); err != nil {
		return ""
	}
	id := ""
	switch typ := ev.GetType(); {
	case strings.HasPrefix(typ, "esim."):
		id = p.Data.ID
	case strings.HasPrefix(typ, "topup."):
		id = p.Data.EsimID
	}
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return ""
	}
	return id
}

// timeline is the eSIM's life so far, oldest first, then what is still to
// come.
func timeline(es *orderingv1.Esim, events []esimEvent) []step {
	done := []step{{Label: "Issued", At: es.GetCreatedAt(), Done: true, Detail: "Allocated: ready to install"}}
	var todo []step
	if at := es.GetInstalledAt(); at != nil {
		done = append(done, step{Label: "Installed", At: at, Done: true, Detail: "The profile was downloaded and installed on a device"})
	} else {
		todo = append(todo, step{Label: "Installed", Detail: "Not yet: the profile has not been installed on a device"})
	}
	if at := es.GetActivatedAt(); at != nil {
		done = append(done, step{Label: "Activated", At: at, Done: true, Detail: "First attach to a network: the validity started"})
	} else {
		todo = append(todo, step{Label: "Activated", Detail: "Not yet: validity starts at the first attach to a network"})
	}
	for _, t := range es.GetTopups() {
		done = append(done, step{Label: "Top-up", At: t.GetCreatedAt(), Done: true, TopUp: t})
	}
	slices.SortStableFunc(done, func(x, y step) int { return x.At.AsTime().Compare(y.At.AsTime()) })
	if es.GetStatus() == "DEPLETED" {
		// Its time is the 100 percent usage event's, when there is one.
		s := step{Label: "Data used up", Done: true, Detail: "Depleted: a top-up makes it active again"}
		for _, ev := range events {
			if ev.GetType() == limits.EventEsimUsage && ev.ThresholdPercent == 100 {
				s.At = ev.GetCreatedAt()
				break
			}
		}
		done = append(done, s)
	}
	switch at := es.GetExpiresAt(); {
	case es.GetStatus() == "EXPIRED":
		done = append(done, step{Label: "Expired", At: at, Done: true, Detail: "Validity over: final"})
	case at != nil:
		todo = append(todo, step{Label: "Expires", At: at, Detail: "When the validity ends; top-ups extend it"})
	default:
		todo = append(todo, step{Label: "Expires", Detail: validityDetail(es)})
	}
	return append(done, todo...)
}

func validityDetail(es *orderingv1.Esim) string {
	d := int64(es.GetValidityDays())
	unit := " days"
	if d == 1 {
		unit = " day"
	}
	return strconv.FormatInt(d, 10) + unit + " after activation"
}

func usageOf(es *orderingv1.Esim) usage {
	d := es.GetData()
	u := usage{Unlimited: d.GetUnlimited(), Used: d.GetUsedBytes(), Total: d.GetTotalBytes(), UpdatedAt: d.GetUpdatedAt()}
	if u.Unlimited {
		return u
	}
	u.Remaining = max(u.Total-u.Used, 0)
	if u.Total > 0 {
		// Rounded down: 100% only once all of it is used.
		u.Percent = min(u.Used*100/u.Total, 100)
	}
	return u
}
