package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/kafka"
	"github.com/esimplatform/esim/services/ordering/orderingpb"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
)

// event is the event id of type t about order orderID.
func event(id string, t ordering.EventType, orderID uuid.UUID) ordering.OutboxEvent {
	return ordering.OutboxEvent{Event: ordering.Event{
		ID: id, Type: t, OrderID: orderID, CreatedAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC),
	}}
}

// An order's, a top-up's and an eSIM's events each reach the topic as
// the OrderEvent of what they are about, each with whose it is and the
// order it concerns, keyed by that order: for a top-up and an eSIM the
// eSIM's, so that all of one order's facts share a partition and keep
// their order. Only esim.usage has a threshold.
func TestEachKindOfEventIsPublishedKeyedByItsOrder(t *testing.T) {
	ctx := context.Background()
	deps := &orderingtest.Deps{Kafka: kafkatest.New(t)}
	p := kafka.NewPublisher(deps.Kafka.Config, deps.Topic(), nil)
	t.Cleanup(func() { p.Close() })
	if err := p.EnsureTopic(ctx); err != nil {
		t.Fatal(err)
	}

	account := uuid.New()
	live := ordering.Scope{AccountID: account, Environment: ordering.Live}
	sandbox := ordering.Scope{AccountID: uuid.New(), Environment: ordering.Sandbox}
	orderID, esimID, topUpID := uuid.New(), uuid.New(), uuid.New()
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	order := ordering.Order{ID: orderID, Scope: live, PlanID: uuid.New(), Quantity: 1, Days: 1, Status: ordering.StatusCompleted, CreatedAt: at}
	esim := ordering.Esim{
		ID: esimID, OrderID: orderID, Scope: live, PlanID: order.PlanID, Countries: []string{"FR"},
		ICCID: "8944500102198304826", Status: ordering.EsimActive, ValidityDays: 7, CreatedAt: at,
		Data:        ordering.EsimData{TotalBytes: 1 << 30, UsedBytes: 900 << 20, UpdatedAt: at},
		InstalledAt: at, ActivatedAt: at, ExpiresAt: at.Add(7 * 24 * time.Hour),
	}
	topUp := ordering.TopUp{
		ID: topUpID, EsimID: esimID, EsimOrderID: orderID, Scope: live, PlanID: order.PlanID,
		Days: 7, Bytes: 1 << 30, Currency: "USD", AmountMinor: 500, Status: ordering.StatusCompleted, CreatedAt: at,
	}
	otherOrder := ordering.Order{ID: uuid.New(), Scope: sandbox, Status: ordering.StatusFailed, CreatedAt: at}
	installed := esim
	installed.Status, installed.ActivatedAt, installed.ExpiresAt = ordering.EsimInstalled, time.Time{}, time.Time{}

	usage := event("evt_usage", ordering.EventEsimUsage, orderID)
	usage.Threshold = 80
	// The top-up's event names the top-up's own order; it is published
	// under the eSIM's.
	pubs := []ordering.Publication{
		{Event: event("evt_order", ordering.EventOrderCompleted, orderID), Order: order},
		{Event: event("evt_installed", ordering.EventEsimInstalled, orderID), Esim: &installed},
		{Event: usage, Esim: &esim},
		{Event: event("evt_topup", ordering.EventTopUpCompleted, topUpID), TopUp: &topUp},
		{Event: event("evt_other", ordering.EventOrderFailed, otherOrder.ID), Order: otherOrder},
	}
	if err := p.Publish(ctx, pubs); err != nil {
		t.Fatalf("Publish: %v", err)
	}

	published := deps.WaitForEvents(t, len(pubs))
	if len(published) != len(pubs) {
		t.Fatalf("%d messages on the topic, want %d", len(published), len(pubs))
	}
	header := func(id string, typ string, scope ordering.Scope, env accountsv1.Environment, order uuid.UUID) *orderingv1.OrderEvent {
		return &orderingv1.OrderEvent{
			Id: id, Type: typ, CreatedAt: timestamppb.New(pubs[0].Event.CreatedAt),
			AccountId: scope.AccountID.String(), Environment: env, OrderId: order.String(),
		}
	}
	want := map[string]*orderingv1.OrderEvent{}
	w := header("evt_order", "order.completed", live, accountsv1.Environment_ENVIRONMENT_LIVE, orderID)
	w.Order = orderingpb.Order(order)
	want[w.Id] = w
	w = header("evt_installed", "esim.installed", live, accountsv1.Environment_ENVIRONMENT_LIVE, orderID)
	w.Esim = orderingpb.Esim(installed)
	want[w.Id] = w
	w = header("evt_usage", "esim.usage", live, accountsv1.Environment_ENVIRONMENT_LIVE, orderID)
	w.Esim, w.ThresholdPercent = orderingpb.Esim(esim), 80
	want[w.Id] = w
	w = header("evt_topup", "topup.completed", live, accountsv1.Environment_ENVIRONMENT_LIVE, orderID)
	w.Topup = orderingpb.TopUp(topUp)
	want[w.Id] = w
	w = header("evt_other", "order.failed", sandbox, accountsv1.Environment_ENVIRONMENT_SANDBOX, otherOrder.ID)
	w.Order = orderingpb.Order(otherOrder)
	want[w.Id] = w

	partitions := map[string]int{}
	for _, m := range published {
		e := m.Event
		wantEvent, ok := want[e.GetId()]
		if !ok {
			t.Errorf("message of event %q was not published", e.GetId())
			continue
		}
		if !proto.Equal(e, wantEvent) {
			t.Errorf("event %s:\n got %v\nwant %v", e.GetId(), e, wantEvent)
		}
		if string(m.Message.Key) != wantEvent.GetOrderId() {
			t.Errorf("event %s keyed %q, want its order %s", e.GetId(), m.Message.Key, wantEvent.GetOrderId())
		}
		if e.GetOrderId() == orderID.String() {
			partitions[e.GetId()] = m.Message.Partition
		}
	}
	for id, partition := range partitions {
		if partition != partitions["evt_order"] {
			t.Errorf("event %s is on partition %d, its order's on %d", id, partition, partitions["evt_order"])
		}
	}
	if len(partitions) != 4 {
		t.Errorf("%d events of order %s on the topic, want 4", len(partitions), orderID)
	}
}
