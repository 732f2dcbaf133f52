package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
)

var (
	japan1GB   = catalogue.SeedPlanID("jp-1gb-7d").String()
	asia1GB    = catalogue.SeedPlanID("asia-1gb-7d").String()
	japanDaily = catalogue.SeedPlanID("jp-unlimited-day").String()
	france1GB  = catalogue.SeedPlanID("fr-1gb-7d").String()
)

const gib = int64(1) << 30

// lifecycleFixture is one sandbox account with one fresh Japan 5 GB eSIM.
type lifecycleFixture struct {
	deps    *orderingtest.Deps
	client  orderingv1.Ordering
	account string
	scope   *orderingv1.Scope
	esim    *orderingv1.Esim
}

func newLifecycle(t *testing.T, balance int64) lifecycleFixture {
	t.Helper()
	deps := orderingtest.StartDeps(t, nil)
	_, u := orderingtest.Start(t, deps.Config(t))
	f := lifecycleFixture{deps: deps, client: orderingtest.Client(u, internalauth.Gateway), account: uuid.NewString()}
	f.scope = &orderingv1.Scope{AccountId: f.account, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
	deps.TopUp(t, f.account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", balance, "t")
	res, err := f.client.CreateOrder(context.Background(), order(f.account, "first", ""))
	if err != nil || res.GetOrder().GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
		t.Fatalf("CreateOrder = %v, %v", res, err)
	}
	f.esim = res.GetOrder().GetEsims()[0]
	return f
}

func (f lifecycleFixture) simulate(action string, bytes *int64) (*orderingv1.Esim, error) {
	return f.client.SimulateEsim(context.Background(), &orderingv1.SimulateEsimRequest{Scope: f.scope, EsimId: f.esim.GetId(), Action: action, Bytes: bytes})
}

func (f lifecycleFixture) mustSimulate(t *testing.T, action string, bytes *int64, status string) *orderingv1.Esim {
	t.Helper()
	e, err := f.simulate(action, bytes)
	if err != nil || e.GetStatus() != status {
		t.Fatalf("simulate %s = %v, %v; want %s", action, e.GetStatus(), err, status)
	}
	return e
}

func (f lifecycleFixture) topUp(key, plan string, days *int32) (*orderingv1.CreateTopUpResponse, error) {
	return f.client.CreateTopUp(context.Background(), &orderingv1.CreateTopUpRequest{
		Scope: f.scope, Currency: "USD", IdempotencyKey: key, EsimId: f.esim.GetId(), PlanId: plan, Days: days,
	})
}

// wantInvalid fails the test unless err is invalid_argument naming field.
func wantInvalid(t *testing.T, doing string, err error, field string) {
	t.Helper()
	var te twirp.Error
	if !errors.As(err, &te) || te.Code() != twirp.InvalidArgument || te.Meta("argument") != field {
		t.Errorf("%s = %v; want invalid_argument on %s", doing, err, field)
	}
}

// A sandbox eSIM walks its whole life as DESIGN 3b says: each status,
// time and byte count as the network would leave them, a top-up that
// revives a depleted eSIM and extends its validity, and one event per
// step, with each usage threshold told once.
func TestSandboxEsimLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newLifecycle(t, 100_00)
	if f.esim.GetStatus() != "ALLOCATED" || f.esim.GetInstalledAt() != nil || f.esim.GetExpiresAt() != nil || f.esim.GetData().GetTotalBytes() != 5*gib {
		t.Fatalf("fresh eSIM: %v", f.esim)
	}
	installed := f.mustSimulate(t, "install", nil, "INSTALLED")
	if installed.GetInstalledAt() == nil || installed.GetActivatedAt() != nil {
		t.Errorf("installed eSIM's times: %v", installed)
	}
	active := f.mustSimulate(t, "activate", nil, "ACTIVE")
	if got := active.GetExpiresAt().AsTime().Sub(active.GetActivatedAt().AsTime()); got != 30*24*time.Hour {
		t.Errorf("expires %s after activation, want 30 days", got)
	}
	used := 5 * gib * 60 / 100
	if e := f.mustSimulate(t, "consume", &used, "ACTIVE"); e.GetData().GetUsedBytes() != used {
		t.Errorf("used %d bytes after consuming %d", e.GetData().GetUsedBytes(), used)
	}
	rest := 10 * gib
	if e := f.mustSimulate(t, "consume", &rest, "DEPLETED"); e.GetData().GetUsedBytes() != 5*gib {
		t.Errorf("used %d bytes past the total, want it capped at %d", e.GetData().GetUsedBytes(), 5*gib)
	}

	res, err := f.topUp("more", asia1GB, nil)
	if err != nil || res.GetTopup().GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED || res.GetReplayed() {
		t.Fatalf("CreateTopUp = %v, %v", res, err)
	}
	topped, err := f.client.GetEsim(ctx, &orderingv1.GetEsimRequest{Scope: f.scope, Id: f.esim.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if topped.GetStatus() != "ACTIVE" || topped.GetData().GetTotalBytes() != 6*gib || topped.GetValidityDays() != 37 ||
		topped.GetExpiresAt().AsTime().Sub(active.GetExpiresAt().AsTime()) != 7*24*time.Hour || len(topped.GetTopups()) != 1 {
		t.Errorf("after a 1 GB, 7-day top-up: %v", topped)
	}
	replay, err := f.topUp("more", asia1GB, nil)
	if err != nil || !replay.GetReplayed() || replay.GetTopup().GetId() != res.GetTopup().GetId() {
		t.Errorf("the top-up's replay = %v, %v", replay, err)
	}
	expired := f.mustSimulate(t, "expire", nil, "EXPIRED")
	if expired.GetExpiresAt() == nil {
		t.Errorf("expired eSIM without its expiry: %v", expired)
	}

	// The money: the order and the top-up each debited once, nothing
	// refunded, and the ledger adds up.
	orders := f.deps.CheckMoney(t, f.client, f.account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD")
	if len(orders) != 1 {
		t.Errorf("%d orders listed, want the one order (a top-up is shown with its eSIM)", len(orders))
	}

	type seen struct {
		typ       string
		threshold int32
	}
	want := []seen{
		{"order.completed", 0}, {"esim.installed", 0}, {"esim.activated", 0}, {"esim.usage", 50},
		{"esim.usage", 80}, {"esim.usage", 100}, {"topup.completed", 0}, {"esim.expired", 0},
	}
	events := f.deps.WaitForEvents(t, len(want))
	got := map[seen]int{}
	for _, p := range events {
		e := p.Event
		got[seen{e.GetType(), e.GetThresholdPercent()}]++
		if e.GetAccountId() != f.account || e.GetEnvironment() != accountsv1.Environment_ENVIRONMENT_SANDBOX || e.GetOrderId() != f.esim.GetOrderId() {
			t.Errorf("event %s %s: account %s, environment %s, order %s; want the eSIM's", e.GetId(), e.GetType(), e.GetAccountId(), e.GetEnvironment(), e.GetOrderId())
		}
		if string(p.Message.Key) != f.esim.GetOrderId() {
			t.Errorf("event %s keyed %q, want the eSIM's order", e.GetType(), p.Message.Key)
		}
		switch e.GetType() {
		case "topup.completed":
			if e.GetTopup().GetId() != res.GetTopup().GetId() {
				t.Errorf("topup.completed carries %v", e.GetTopup())
			}
		case "order.completed":
		default:
			if e.GetEsim().GetId() != f.esim.GetId() {
				t.Errorf("%s carries eSIM %v", e.GetType(), e.GetEsim())
			}
		}
	}
	for _, w := range want {
		if got[w] != 1 {
			t.Errorf("%d events %s (threshold %d), want one; all: %v", got[w], w.typ, w.threshold, got)
		}
	}
	if len(events) != len(want) {
		t.Errorf("%d events, want %d: %v", len(events), len(want), got)
	}
	// Each eSIM event carries the eSIM as that step left it.
	for _, p := range events {
		if p.Event.GetType() == "esim.installed" && p.Event.GetEsim().GetStatus() != "INSTALLED" {
			t.Errorf("esim.installed carries status %s", p.Event.GetEsim().GetStatus())
		}
	}
}

// Every refused step of a sandbox eSIM answers invalid_argument naming
// the field at fault, or not_found, and changes nothing: neither the
// eSIM nor the money.
func TestSandboxStepsRefusedChangeNothing(t *testing.T) {
	ctx := context.Background()
	f := newLifecycle(t, 30_00)
	before, err := f.client.GetEsim(ctx, &orderingv1.GetEsimRequest{Scope: f.scope, Id: f.esim.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	zero := int64(0)
	_, err = f.simulate("activate", nil)
	wantInvalid(t, "activate before install", err, "action")
	_, err = f.simulate("consume", &one)
	wantInvalid(t, "consume before activation", err, "action")
	_, err = f.simulate("dance", nil)
	wantInvalid(t, "an unknown action", err, "action")
	_, err = f.simulate("consume", &zero)
	wantInvalid(t, "consume of 0 bytes", err, "bytes")
	_, err = f.simulate("install", &one)
	wantInvalid(t, "install with bytes", err, "bytes")

	live := &orderingv1.Scope{AccountId: f.account, Environment: accountsv1.Environment_ENVIRONMENT_LIVE}
	_, err = f.client.SimulateEsim(ctx, &orderingv1.SimulateEsimRequest{Scope: live, EsimId: f.esim.GetId(), Action: "install"})
	if codeOf(err) != twirp.NotFound {
		t.Errorf("simulate with a live scope = %v, want not_found", err)
	}
	stranger := &orderingv1.Scope{AccountId: uuid.NewString(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
	_, err = f.client.SimulateEsim(ctx, &orderingv1.SimulateEsimRequest{Scope: stranger, EsimId: f.esim.GetId(), Action: "install"})
	if codeOf(err) != twirp.NotFound {
		t.Errorf("simulate on another account's eSIM = %v, want not_found", err)
	}

	days := int32(3)
	_, err = f.topUp("daily", japanDaily, nil)
	wantInvalid(t, "a per-day plan for a fixed eSIM", err, "plan_id")
	_, err = f.topUp("france", france1GB, nil)
	wantInvalid(t, "a plan not covering Japan", err, "plan_id")
	_, err = f.topUp("days", japan1GB, &days)
	wantInvalid(t, "days on a fixed plan", err, "days")
	_, err = f.topUp("bad", "not-a-uuid", nil)
	wantInvalid(t, "a malformed plan id", err, "plan_id")
	if _, err = f.topUp("unknown", uuid.NewString(), nil); codeOf(err) != twirp.NotFound {
		t.Errorf("a top-up with an unknown plan = %v, want not_found", err)
	}
	_, err = f.client.CreateTopUp(ctx, &orderingv1.CreateTopUpRequest{Scope: stranger, Currency: "USD", EsimId: f.esim.GetId(), PlanId: japan1GB})
	if codeOf(err) != twirp.NotFound {
		t.Errorf("a top-up of another account's eSIM = %v, want not_found", err)
	}
	// The balance (30.00 less the order) covers no 5 GB plan.
	japan20GB := catalogue.SeedPlanID("jp-20gb-30d").String()
	_, err = f.topUp("dear", japan20GB, nil)
	var te twirp.Error
	if !errors.As(err, &te) || te.Code() != twirp.FailedPrecondition || te.Meta("reason") != "insufficient_funds" {
		t.Errorf("a top-up the balance does not cover = %v, want insufficient_funds", err)
	}
	// The same key goes through once the balance covers it.
	f.deps.TopUp(t, f.account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 100_00, "t2")
	if res, err := f.topUp("dear", japan20GB, nil); err != nil || res.GetTopup().GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
		t.Errorf("the refused top-up's key after a top-up of the balance = %v, %v", res, err)
	}
	// The key of a top-up is not an order's.
	if _, err := f.client.CreateOrder(ctx, order(f.account, "dear", "")); err == nil {
		t.Error("an order with a top-up's idempotency key went through")
	} else {
		wantInvalid(t, "an order with a top-up's key", err, "Idempotency-Key")
	}

	after, err := f.client.GetEsim(ctx, &orderingv1.GetEsimRequest{Scope: f.scope, Id: f.esim.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetStatus() != before.GetStatus() || after.GetData().GetUsedBytes() != 0 || len(after.GetTopups()) != 1 {
		t.Errorf("after refused steps and one top-up: %v", after)
	}
	f.mustSimulate(t, "expire", nil, "EXPIRED")
	_, err = f.simulate("expire", nil)
	wantInvalid(t, "expire an expired eSIM", err, "action")
	_, err = f.topUp("late", japan1GB, nil)
	wantInvalid(t, "a top-up of an expired eSIM", err, "id")
	f.deps.CheckMoney(t, f.client, f.account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD")
	if !proto.Equal(before.GetData().GetUpdatedAt(), after.GetData().GetUpdatedAt()) {
		t.Errorf("data read at %v, then %v: refused steps changed it", before.GetData().GetUpdatedAt(), after.GetData().GetUpdatedAt())
	}
}

// codeOf is err's Twirp code, "" for none.
func codeOf(err error) twirp.ErrorCode {
	var te twirp.Error
	if errors.As(err, &te) {
		return te.Code()
	}
	return ""
}
