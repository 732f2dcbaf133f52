package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/proto/partnerapi"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// esimEvent is an eSIM's event of scope's account, of one eSIM and order
// of its own; threshold is esim.usage's.
func esimEvent(scope *webhookv1.Scope, eventType string, threshold int32) *orderingv1.OrderEvent {
	return webhooktest.EsimEvent(scope.GetAccountId(), scope.GetEnvironment(), eventType, threshold)
}

func topUpEvent(scope *webhookv1.Scope, eventType string) *orderingv1.OrderEvent {
	return webhooktest.TopUpEvent(scope.GetAccountId(), scope.GetEnvironment(), eventType)
}

// ofOrder makes e one of of's order's events: the same order, the same
// key, so consumed after of.
func ofOrder(e, of *orderingv1.OrderEvent) *orderingv1.OrderEvent {
	e.OrderId = of.GetOrderId()
	if e.GetEsim() != nil {
		e.Esim.OrderId = of.GetOrderId()
	}
	if e.GetTopup() != nil {
		e.Topup.EsimOrderId = of.GetOrderId()
	}
	return e
}

// wantData is the partner API's rendering of what src is about.
func wantData(t *testing.T, src *orderingv1.OrderEvent) []byte {
	t.Helper()
	var v any
	var err error
	switch {
	case src.GetEsim() != nil:
		v, err = partnerapi.EsimFromProto(src.GetEsim())
	case src.GetTopup() != nil:
		v, err = partnerapi.TopUpFromProto(src.GetTopup())
	default:
		v, err = partnerapi.OrderFromProto(src.GetOrder())
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := partnerapi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The eSIM's events after its order and its top-ups' are delivered as
// order events are: each once, signed as the public library verifies
// with the scope's secret, the eSIM or the top-up as the partner API
// shows it in data, esim.usage's threshold in threshold_percent and no
// other event with one; each listed by its type and under the eSIM's
// order, as is an order event of that order.
func TestDeliversTheEsimsAndTopUpsEvents(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t)
	s := start(t)
	sandboxScope, sandboxSecret := s.endpoint(t, sandbox, hooks.URL)
	_, otherSecret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(sandboxSecret, otherSecret)

	installed := esimEvent(sandboxScope, "esim.installed", 0)
	order := ofOrder(event(sandboxScope, "order.completed"), installed)
	order.Order.Id, order.Order.Esims[0].OrderId = installed.GetOrderId(), installed.GetOrderId()
	published := []*orderingv1.OrderEvent{
		order,
		installed,
		ofOrder(esimEvent(sandboxScope, "esim.activated", 0), installed),
		ofOrder(esimEvent(sandboxScope, "esim.usage", 50), installed),
		ofOrder(esimEvent(sandboxScope, "esim.usage", 80), installed),
		ofOrder(esimEvent(sandboxScope, "esim.usage", 100), installed),
		ofOrder(topUpEvent(sandboxScope, "topup.completed"), installed),
		ofOrder(topUpEvent(sandboxScope, "topup.failed"), installed),
		ofOrder(esimEvent(sandboxScope, "esim.expiring", 0), installed),
		ofOrder(esimEvent(sandboxScope, "esim.expired", 0), installed),
	}
	events := map[string]*orderingv1.OrderEvent{}
	for _, e := range published {
		events[e.GetId()] = e
	}
	s.publish(t, published...)
	for _, e := range published {
		got := s.wait(t, e.GetId(), delivered, 30*time.Second)
		if got.GetType() != e.GetType() || got.GetOrderId() != installed.GetOrderId() || !proto.Equal(got.GetScope(), sandboxScope) ||
			len(got.GetAttempts()) != 1 || got.GetAttempts()[0].GetStatusCode() != 200 {
			t.Errorf("event %s stored as %s of order %s in %v, attempts %v; want %s of %s in %v, delivered at once",
				e.GetId(), got.GetType(), got.GetOrderId(), got.GetScope(), got.GetAttempts(), e.GetType(), installed.GetOrderId(), sandboxScope)
		}
	}

	deliveries := hooks.Deliveries()
	if len(deliveries) != len(published) {
		t.Fatalf("%d deliveries, want %d", len(deliveries), len(published))
	}
	for _, d := range deliveries {
		b := decode(t, d)
		src := events[b.ID]
		if src == nil || b.ID != d.ID() {
			t.Fatalf("delivery %s with webhook-id %s: not the id of an event published", b.ID, d.ID())
		}
		if !d.VerifiedBy(sandboxSecret) || d.VerifiedBy(otherSecret) {
			t.Errorf("delivery %s: verified by its scope's secret %v (%v), by another scope's %v; want true, false", b.ID, d.VerifiedBy(sandboxSecret), d.Checks[sandboxSecret], d.VerifiedBy(otherSecret))
		}
		if want := wantData(t, src); !bytes.Equal(b.Data, want) {
			t.Errorf("%s data = %s\nwant %s", src.GetType(), b.Data, want)
		}
		if b.Event != src.GetType() || b.Environment != "sandbox" || !b.CreatedAt.Equal(src.GetCreatedAt().AsTime()) {
			t.Errorf("envelope %s %s %s, want %s sandbox %s", b.Event, b.Environment, b.CreatedAt, src.GetType(), src.GetCreatedAt().AsTime())
		}
		var envelope map[string]json.RawMessage
		if err := json.Unmarshal(d.Body, &envelope); err != nil {
			t.Fatal(err)
		}
		threshold, has := envelope["threshold_percent"]
		if src.GetType() == "esim.usage" {
			if string(threshold) != strconv.Itoa(int(src.GetThresholdPercent())) {
				t.Errorf("esim.usage %d: threshold_percent %s", src.GetThresholdPercent(), threshold)
			}
		} else if has {
			t.Errorf("%s has threshold_percent %s; want it on esim.usage alone", src.GetType(), threshold)
		}
	}

	ctx := context.Background()
	for _, typ := range []string{"order.completed", "esim.installed", "esim.activated", "esim.usage", "esim.expiring", "esim.expired", "topup.completed", "topup.failed"} {
		page, err := s.operator.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: sandboxScope, Type: typ})
		want := 1
		if typ == "esim.usage" {
			want = 3
		}
		if err != nil || page.GetTotal() != int64(want) {
			t.Errorf("ListEvents of %s = %d, %v; want %d", typ, page.GetTotal(), err, want)
			continue
		}
		for _, e := range page.GetEvents() {
			if e.GetType() != typ || events[e.GetId()] == nil {
				t.Errorf("ListEvents of %s lists %s %s", typ, e.GetType(), e.GetId())
			}
		}
	}
	page, err := s.operator.ListEvents(ctx, &webhookv1.ListEventsRequest{OrderId: installed.GetOrderId()})
	if err != nil || page.GetTotal() != int64(len(published)) {
		t.Errorf("ListEvents of the eSIM's order = %d, %v; want all %d", page.GetTotal(), err, len(published))
	}
}

// An eSIM's or a top-up's event that can never be stored (no eSIM or
// top-up, a threshold missing or where none belongs, without whose it is
// or its order) is logged and skipped, stored nowhere, and the events
// after it on its partition arrive.
func TestBadEsimAndTopUpEventsAreSkipped(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t)
	s := start(t)
	scope, secret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(secret)
	first := esimEvent(scope, "esim.installed", 0)
	bad := []*orderingv1.OrderEvent{
		ofOrder(esimEvent(scope, "esim.usage", 0), first),
		ofOrder(esimEvent(scope, "esim.usage", 75), first),
		ofOrder(esimEvent(scope, "esim.activated", 50), first),
		ofOrder(topUpEvent(scope, "topup.completed"), first),
		ofOrder(esimEvent(scope, "topup.failed", 0), first),
		ofOrder(topUpEvent(scope, "esim.expired"), first),
		ofOrder(esimEvent(scope, "esim.deleted", 0), first),
		ofOrder(esimEvent(scope, "esim.expired", 0), first),
		ofOrder(esimEvent(scope, "esim.expired", 0), first),
		ofOrder(esimEvent(scope, "esim.expired", 0), first),
	}
	bad[3].Topup = nil
	bad[7].AccountId = ""
	bad[8].Environment = 0
	bad[9].OrderId = ""
	last := ofOrder(esimEvent(scope, "esim.activated", 0), first)
	s.publish(t, append(append([]*orderingv1.OrderEvent{first}, bad...), last)...)

	s.wait(t, last.GetId(), delivered, 30*time.Second)
	if n := strings.Count(s.logs.String(), "skipping a Kafka message that is no order event"); n != len(bad) {
		t.Errorf("%d messages skipped, want %d:\n%s", n, len(bad), s.logs)
	}
	for _, e := range bad {
		if _, err := s.operator.GetEvent(context.Background(), &webhookv1.GetEventRequest{Id: e.GetId()}); err == nil {
			t.Errorf("the bad %s event %s was stored", e.GetType(), e.GetId())
		}
	}
	page, err := s.operator.ListEvents(context.Background(), &webhookv1.ListEventsRequest{Scope: scope})
	if err != nil || page.GetTotal() != 2 {
		t.Errorf("ListEvents = %d, %v; want the first and the last", page.GetTotal(), err)
	}
	if n := len(hooks.Deliveries()); n != 2 {
		t.Errorf("%d deliveries, want the first's and the last's", n)
	}
}

// An order event published before ordering named whose it is and its
// order on every event is delivered as it was: its scope and order are
// its order's.
func TestAnOrderEventWithoutItsScopeFieldsIsTheOrders(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t)
	s := start(t)
	scope, secret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(secret)
	old := event(scope, "order.failed")
	old.AccountId, old.Environment, old.OrderId = "", 0, ""
	s.publish(t, old)
	got := s.wait(t, old.GetId(), delivered, 30*time.Second)
	if !proto.Equal(got.GetScope(), scope) || got.GetOrderId() != old.GetOrder().GetId() {
		t.Errorf("stored in %v for order %s; want %v, %s", got.GetScope(), got.GetOrderId(), scope, old.GetOrder().GetId())
	}
	d := hooks.Deliveries()
	if len(d) != 1 || !d[0].VerifiedBy(secret) || !bytes.Equal(decode(t, d[0]).Data, wantData(t, old)) {
		t.Errorf("deliveries %v; want the order's, signed", d)
	}
}
