package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/kafka/embedded"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// eventJSON is an event as GET /v1/events answers it.
type eventJSON struct {
	ID        string  `json:"id"`
	Event     string  `json:"event"`
	CreatedAt string  `json:"created_at"`
	OrderID   *string `json:"order_id"`
	Status    string  `json:"status"`
	URL       *string `json:"url"`
	Attempts  []struct {
		Number      int     `json:"number"`
		AttemptedAt string  `json:"attempted_at"`
		DurationMS  int64   `json:"duration_ms"`
		StatusCode  *int    `json:"status_code"`
		Error       *string `json:"error"`
	} `json:"attempts"`
}

type eventList struct {
	Data       []eventJSON `json:"data"`
	Pagination struct {
		Total   int  `json:"total"`
		HasMore bool `json:"has_more"`
	} `json:"pagination"`
}

// hookBody is a delivery's body as a receiver parses it.
type hookBody struct {
	ID          string          `json:"id"`
	Event       string          `json:"event"`
	CreatedAt   string          `json:"created_at"`
	Environment string          `json:"environment"`
	Data        json.RawMessage `json:"data"`
}

// setWebhook registers url for the partner's environment, as esimctl does,
// and returns the signing secret.
func (pt partner) setWebhook(url string) string {
	pt.p.t.Helper()
	e, err := pt.p.webhooks.SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{
		Scope: &webhookv1.Scope{AccountId: pt.accountID, Environment: pt.env}, Url: url,
	})
	if err != nil {
		pt.p.t.Fatalf("set the webhook URL: %v", err)
	}
	return e.GetSecret()
}

// events lists the partner's events through the API.
func (pt partner) events(query string) eventList {
	pt.p.t.Helper()
	r := pt.p.get("/v1/events?"+query, bearer(pt.key))
	if r.status != http.StatusOK {
		pt.p.t.Fatalf("GET /v1/events?%s: %d %s", query, r.status, r.body)
	}
	var list eventList
	r.json(pt.p.t, &list)
	return list
}

// eventsUntil polls GET /v1/events until done holds for the list.
func (pt partner) eventsUntil(query string, within time.Duration, done func(eventList) bool) eventList {
	pt.p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		list := pt.events(query)
		if done(list) {
			return list
		}
		if time.Now().After(deadline) {
			pt.p.t.Fatalf("GET /v1/events?%s after %s: %+v", query, within, list.Data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkDelivery holds a delivery to the contract: as the OpenAPI
// document's webhooks section describes it, signed with secret as the
// public library verifies, the body's id the webhook-id, the event and
// environment named, and data exactly GET /v1/orders/{id}'s.
func checkDelivery(t *testing.T, pt partner, d webhooktest.Delivery, secret, event, orderID string) hookBody {
	t.Helper()
	checkWebhook(t, pt.p.openAPIDoc(), d)
	if !d.VerifiedBy(secret) {
		t.Errorf("the Standard Webhooks library refused the delivery: %v", d.Checks[secret])
	}
	var body hookBody
	if err := json.Unmarshal(d.Body, &body); err != nil {
		t.Fatalf("delivery body %s: %v", d.Body, err)
	}
	if body.ID != d.ID() || !strings.HasPrefix(body.ID, "evt_") {
		t.Errorf("body id %q, webhook-id %q: want one evt_ id", body.ID, d.ID())
	}
	if body.Event != event || body.Environment != pt.env.ShortName() {
		t.Errorf("event %q in %q; want %q in %q", body.Event, body.Environment, event, pt.env.ShortName())
	}
	if _, err := time.Parse(time.RFC3339, body.CreatedAt); err != nil {
		t.Errorf("created_at %q: %v", body.CreatedAt, err)
	}
	r := pt.p.get("/v1/orders/"+orderID, bearer(pt.key))
	var read struct {
		Data json.RawMessage `json:"data"`
	}
	r.json(t, &read)
	// Byte for byte, not as JSON that reads the same: both are
	// partnerapi's rendering of ordering's order, written by one encoder.
	if !bytes.Equal(body.Data, read.Data) {
		t.Errorf("the event's data is not the order as GET /v1/orders/{id} answers it, byte for byte:\nevent: %s\nAPI:   %s", body.Data, read.Data)
	}
	return body
}

// TestOrderOutcomesArriveAsSignedWebhooks walks the Done-when of the
// webhooks: a sandbox order's order.completed at the sandbox URL, a failed
// order's order.failed, a live order at the live URL over https, each once,
// verified by the public Standard Webhooks library, and each listed by
// GET /v1/events with its attempt; never another account's or
// environment's.
func TestOrderOutcomesArriveAsSignedWebhooks(t *testing.T) {
	liveHooks := webhooktest.NewTLSReceiver(t)
	p := start(t, options{endpointCAFile: liveHooks.CAFile(t)})
	sb := p.partner("USD", sandbox, 100_00)
	plan := p.firstPlanID(sb.key, "type=fixed&limit=1")

	sandboxHooks := webhooktest.NewReceiver(t)
	secret := sb.setWebhook(sandboxHooks.URL)
	sandboxHooks.Trust(secret)

	completed := sb.order("hook-1", orderBody(plan, ""))
	failed := sb.order("hook-2", orderBody(plan, `"customer":{"reference":"sandbox:provider_error"}`))
	if completed.status != http.StatusCreated || failed.status != http.StatusBadGateway {
		t.Fatalf("orders answered %d and %d; want 201 and 502", completed.status, failed.status)
	}
	var done struct{ Data orderJSON }
	completed.json(t, &done)
	failedOrder := sb.orders("status=failed").Data[0]

	deliveries := sandboxHooks.Wait(t, 2, 20*time.Second)
	byEvent := map[string]webhooktest.Delivery{}
	for _, d := range deliveries {
		var b hookBody
		_ = json.Unmarshal(d.Body, &b)
		byEvent[b.Event] = d
	}
	checkDelivery(t, sb, byEvent["order.completed"], secret, "order.completed", done.Data.ID)
	checkDelivery(t, sb, byEvent["order.failed"], secret, "order.failed", failedOrder.ID)

	// The live account's URL gets its live order (which fails: live has no
	// provider yet) and nothing of the sandbox's.
	lv := p.partner("USD", live, 100_00)
	liveSecret := lv.setWebhook(liveHooks.URL)
	liveHooks.Trust(liveSecret)
	if r := lv.order("hook-live", orderBody(plan, "")); r.status != http.StatusBadGateway {
		t.Fatalf("live order: %d %s", r.status, r.body)
	}
	liveOrder := lv.orders("").Data[0]
	checkDelivery(t, lv, liveHooks.Wait(t, 1, 20*time.Second)[0], liveSecret, "order.failed", liveOrder.ID)

	list := sb.eventsUntil("", 10*time.Second, func(l eventList) bool {
		return len(l.Data) == 2 && l.Data[0].Status == "delivered" && l.Data[1].Status == "delivered"
	})
	for _, e := range list.Data {
		if len(e.Attempts) != 1 || e.Attempts[0].Number != 1 || e.Attempts[0].StatusCode == nil || *e.Attempts[0].StatusCode != 200 || e.Attempts[0].Error != nil {
			t.Errorf("event %s: attempts %+v; want one, answered 200", e.ID, e.Attempts)
		}
		if e.URL == nil || *e.URL != sandboxHooks.URL {
			t.Errorf("event %s went to %v; want %s", e.ID, e.URL, sandboxHooks.URL)
		}
	}
	if got := sb.events("event=order.failed").Data; len(got) != 1 || *got[0].OrderID != failedOrder.ID {
		t.Errorf("?event=order.failed: %+v; want the failed order's event", got)
	}
	if got := sb.events("order_id=" + done.Data.ID).Data; len(got) != 1 || got[0].Event != "order.completed" {
		t.Errorf("?order_id=: %+v; want the completed order's event", got)
	}
	// Another account's order id, and the other environment's, find nothing.
	if got := sb.events("order_id=" + liveOrder.ID).Data; len(got) != 0 {
		t.Errorf("the sandbox key sees the live order's events: %+v", got)
	}
	if got := lv.events("").Data; len(got) != 1 || *got[0].OrderID != liveOrder.ID {
		t.Errorf("the live key sees %+v; want its one event", got)
	}
	if n := len(sandboxHooks.Deliveries()); n != 2 {
		t.Errorf("the sandbox receiver got %d deliveries; want exactly 2", n)
	}
}

// TestFailingEndpointShowsThreeAttemptsInEvents: an endpoint that answers
// 500 gets 3 attempts, then the event is failed, and GET /v1/events says
// so with each attempt's status code and error.
func TestFailingEndpointShowsThreeAttemptsInEvents(t *testing.T) {
	t.Parallel()
	p := start(t, options{})
	pt := p.partner("EUR", sandbox, 100_00)
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Status: http.StatusInternalServerError, Body: "down for maintenance"})
	hooks.Trust(pt.setWebhook(hooks.URL))
	if r := pt.order("", orderBody(p.firstPlanID(pt.key, "type=fixed&limit=1"), "")); r.status != http.StatusCreated {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	list := pt.eventsUntil("", 20*time.Second, func(l eventList) bool { return len(l.Data) == 1 && l.Data[0].Status == "failed" })
	e := list.Data[0]
	if len(e.Attempts) != 3 {
		t.Fatalf("attempts %+v; want 3", e.Attempts)
	}
	for i, a := range e.Attempts {
		if a.Number != i+1 || a.StatusCode == nil || *a.StatusCode != 500 || a.Error == nil || *a.Error == "" {
			t.Errorf("attempt %d: %+v; want number %d, status 500 and an error", i, a, i+1)
		}
	}
	ids := map[string]bool{}
	for _, d := range hooks.Deliveries() {
		ids[d.ID()] = true
	}
	if len(hooks.Deliveries()) != 3 || len(ids) != 1 || !ids[e.ID] {
		t.Errorf("the receiver got %d deliveries with ids %v; want 3, all %s", len(hooks.Deliveries()), ids, e.ID)
	}
}

func TestEventsRefuseBadQueries(t *testing.T) {
	t.Parallel()
	p := start(t, options{})
	_, _, key := p.account("USD", sandbox)
	for _, q := range []string{"order_id=not-a-uuid", "event=order.shipped", "limit=0", "limit=101", "page=0", "type=ping"} {
		r := p.get("/v1/events?"+q, bearer(key))
		field := strings.SplitN(q, "=", 2)[0]
		e := p.expectError(r, http.StatusBadRequest, "invalid_request")
		if len(e.Error.Details) == 0 || e.Error.Details[0].Field != field {
			t.Errorf("?%s: details %+v; want %s named", q, e.Error.Details, field)
		}
	}
	p.expectError(p.get("/v1/events", ""), http.StatusUnauthorized, "unauthorized")
}

// TestOneTraceFromOrderToWebhook: an order's trace goes from the gateway
// through ordering and the wallet, over Kafka, to the webhook's delivery.
func TestOneTraceFromOrderToWebhook(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	p := start(t, options{spans: spans})
	pt := p.partner("USD", sandbox, 100_00)
	plan := p.firstPlanID(pt.key, "type=fixed&limit=1")
	hooks := webhooktest.NewReceiver(t)
	hooks.Trust(pt.setWebhook(hooks.URL))

	spans.Reset()
	if r := pt.order("traced", orderBody(plan, "")); r.status != http.StatusCreated {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	hooks.Wait(t, 1, 20*time.Second)
	var root tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "POST /v1/orders" && !s.Parent.IsValid() {
			root = s
		}
	}
	if !root.SpanContext.IsValid() {
		t.Fatal("no root span for POST /v1/orders")
	}
	want := []struct{ what, name string }{
		{"ordering's server", "POST /twirp/esim.ordering.v1.Ordering/CreateOrder"},
		{"the wallet's server", "POST /twirp/esim.wallet.v1.Wallet/Debit"},
		{"the relay's publication", "publish"},
		{"the webhook's consumer", "process"},
		{"the delivery", "deliver"},
	}
	// The delivery's span ends after the receiver answered: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var names []string
		missing := ""
		for _, w := range want {
			found := false
			for _, s := range spans.GetSpans() {
				names = append(names, s.Name)
				if strings.Contains(s.Name, w.name) && s.SpanContext.TraceID() == root.SpanContext.TraceID() {
					found = true
				}
			}
			if !found && missing == "" {
				missing = w.what + " (" + w.name + ")"
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span of %s in the order's trace %s; spans: %s", missing, root.SpanContext.TraceID(), strings.Join(names, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBrokerOutageLosesNoWebhook stops Kafka while orders are placed: they
// succeed, and once the broker is back every order's event arrives at the
// partner's endpoint exactly once.
func TestBrokerOutageLosesNoWebhook(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	broker, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cluster := kafkatest.Cluster{Config: kafka.Config{Brokers: broker.Addrs(), Partitions: 3, ReplicationFactor: 1}}
	p := start(t, options{kafka: &cluster})
	pt := p.partner("USD", sandbox, 100_00)
	plan := p.firstPlanID(pt.key, "type=fixed&limit=1")
	hooks := webhooktest.NewReceiver(t)
	secret := pt.setWebhook(hooks.URL)
	hooks.Trust(secret)
	// The topic exists and the consumer reads it before the outage.
	if r := pt.order("before", orderBody(plan, "")); r.status != http.StatusCreated {
		t.Fatalf("order before the outage: %d %s", r.status, r.body)
	}
	hooks.Wait(t, 1, 30*time.Second)

	_, port, err := net.SplitHostPort(broker.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	broker.Close()
	const during = 5
	for i := range during {
		if r := pt.order(fmt.Sprintf("during-%d", i), orderBody(plan, "")); r.status != http.StatusCreated {
			t.Fatalf("order %d while Kafka is down: %d %s", i, r.status, r.body)
		}
	}
	n, _ := strconv.Atoi(port)
	kafkatest.Embedded(t, embedded.Options{Port: n, DataDir: dir})

	deliveries := hooks.Wait(t, 1+during, 90*time.Second)
	orders := map[string]int{}
	for _, d := range deliveries {
		body := checkDelivery(t, pt, d, secret, "order.completed", orderIDOf(t, d))
		orders[body.ID]++
	}
	if len(orders) != 1+during {
		t.Errorf("%d distinct events delivered for %d orders: %v", len(orders), 1+during, orders)
	}
	// Nothing more comes: none of them is published twice.
	pt.eventsUntil("", 10*time.Second, func(l eventList) bool {
		if len(l.Data) != 1+during {
			return false
		}
		for _, e := range l.Data {
			if e.Status != "delivered" {
				return false
			}
		}
		return true
	})
	if got := len(hooks.Deliveries()); got != 1+during {
		t.Errorf("the receiver got %d deliveries; want %d, one per order", got, 1+during)
	}
}

// orderIDOf is the id of the order a delivery carries.
func orderIDOf(t *testing.T, d webhooktest.Delivery) string {
	t.Helper()
	var body struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Data.ID
}
