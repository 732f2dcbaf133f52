package twirpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/ordering/twirpserver"
)

const (
	sandbox = accountsv1.Environment_ENVIRONMENT_SANDBOX
	live    = accountsv1.Environment_ENVIRONMENT_LIVE
)

// Seed plans, and their USD prices.
var (
	japan5GB     = catalogue.SeedPlanID("jp-5gb-30d").String() // 16.50, 30 days
	japanPerDay  = catalogue.SeedPlanID("jp-unlimited-day").String()
	france1GB    = catalogue.SeedPlanID("fr-1gb-7d").String() // 4.50
	japan5GBUSD  = int64(1650)
	perDayUSD    = int64(650)
	france1GBUSD = int64(450)
)

// platform is ordering as the platform runs it, with the real catalogue
// and wallet, and a client for the gateway and one for operators.
type platform struct {
	deps     *orderingtest.Deps
	gateway  orderingv1.Ordering
	operator orderingv1.Ordering
	url      string
}

func start(t *testing.T) *platform {
	t.Helper()
	deps := orderingtest.StartDeps(t, nil)
	_, u := orderingtest.Start(t, deps.Config(t))
	return &platform{deps: deps, url: u,
		gateway:  orderingtest.Client(u, internalauth.Gateway),
		operator: orderingtest.Client(u, internalauth.Operator)}
}

// account is a fresh partner with balance in USD in env.
func (p *platform) account(t *testing.T, env accountsv1.Environment, balance int64) *orderingv1.Scope {
	t.Helper()
	id := uuid.NewString()
	if balance > 0 {
		p.deps.TopUp(t, id, env, "USD", balance, "initial")
	}
	return &orderingv1.Scope{AccountId: id, Environment: env}
}

func (p *platform) balance(t *testing.T, s *orderingv1.Scope) int64 {
	t.Helper()
	return p.deps.Ledger(t, s.GetAccountId(), s.GetEnvironment(), "USD").Balance
}

func (p *platform) checkMoney(t *testing.T, s *orderingv1.Scope) []*orderingv1.Order {
	t.Helper()
	return p.deps.CheckMoney(t, p.operator, s.GetAccountId(), s.GetEnvironment(), "USD")
}

func request(s *orderingv1.Scope, key, plan string) *orderingv1.CreateOrderRequest {
	return &orderingv1.CreateOrderRequest{
		Scope: s, Currency: "USD", IdempotencyKey: key, PlanId: plan,
		Customer: &orderingv1.Customer{Name: "Ada Lovelace", Email: "ada@example.com", Reference: "BK-1"},
	}
}

// wantTwirp fails unless err is a Twirp error with code (and, when given,
// meta argument or reason).
func wantTwirp(t *testing.T, what string, err error, code twirp.ErrorCode, meta ...string) {
	t.Helper()
	var twerr twirp.Error
	if !errors.As(err, &twerr) {
		t.Errorf("%s: err = %v, want Twirp %s", what, err, code)
		return
	}
	if twerr.Code() != code {
		t.Errorf("%s: code = %s (%s), want %s", what, twerr.Code(), twerr.Msg(), code)
	}
	for i := 0; i+1 < len(meta); i += 2 {
		if got := twerr.Meta(meta[i]); got != meta[i+1] {
			t.Errorf("%s: meta %s = %q, want %q (%s)", what, meta[i], got, meta[i+1], twerr.Msg())
		}
	}
}

func TestPolicyCoversEveryMethod(t *testing.T) {
	var methods []string
	service := orderingv1.File_ordering_v1_ordering_proto.Services().ByName("Ordering")
	for i := range service.Methods().Len() {
		methods = append(methods, string(service.Methods().Get(i).Name()))
	}
	if err := twirpserver.Policy.Check(methods); err != nil {
		t.Fatal(err)
	}
}

func TestOrderEndToEnd(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	s := p.account(t, sandbox, 100_000)

	req := request(s, "fixed-3", japan5GB)
	req.Quantity = proto.Int32(3)
	res, err := p.gateway.CreateOrder(ctx, req)
	if err != nil {
		t.Fatalf("CreateOrder: %v", err)
	}
	o := res.GetOrder()
	if res.GetReplayed() || o.GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED || o.GetQuantity() != 3 || o.GetDays() != 0 || o.GetPerDay() ||
		o.GetPlanId() != japan5GB || o.GetAccountId() != s.GetAccountId() || o.GetEnvironment() != sandbox || o.GetError() != nil ||
		!proto.Equal(o.GetPrice(), &orderingv1.Price{UnitMinor: japan5GBUSD, TotalMinor: 3 * japan5GBUSD, Currency: "USD"}) ||
		o.GetCustomer().GetReference() != "BK-1" || len(o.GetEsims()) != 3 {
		t.Fatalf("order = %v", o)
	}
	iccids := map[string]bool{}
	for _, e := range o.GetEsims() {
		if !ordering.ValidICCID(e.GetIccid()) || iccids[e.GetIccid()] {
			t.Errorf("ICCID %q is not 19 digits, 89, Luhn, or is repeated", e.GetIccid())
		}
		iccids[e.GetIccid()] = true
		code := "LPA:1$smdp.sandbox.esim.invalid$" + e.GetMatchingId()
		token := strings.TrimSuffix(strings.TrimPrefix(e.GetQrCodeUrl(), "http://127.0.0.1:8080/qr/"), ".png")
		if e.GetActivationCode() != code || e.GetSmdpAddress() != "smdp.sandbox.esim.invalid" || len(token) != 43 ||
			e.GetStatus() != "ALLOCATED" || e.GetValidityDays() != 30 || e.GetPlanName() != "Japan 5 GB, 30 days" || e.GetOrderId() != o.GetId() ||
			e.GetData().GetUnlimited() || e.GetData().GetTotalBytes() != 5<<30 || e.GetData().GetUsedBytes() != 0 ||
			!e.GetData().GetUpdatedAt().AsTime().Equal(e.GetCreatedAt().AsTime()) ||
			e.GetInstall().GetIosUniversalLink() != "https://esimsetup.apple.com/esim_qrcode_provisioning?carddata="+url.QueryEscape(code) ||
			!strings.Contains(e.GetInstall().GetInstructions(), e.GetMatchingId()) {
			t.Errorf("eSIM = %v", e)
		}
		got, err := p.gateway.GetActivationCode(ctx, &orderingv1.GetActivationCodeRequest{QrToken: token})
		if err != nil || got.GetActivationCode() != code {
			t.Errorf("GetActivationCode(%s) = %v, %v; want %s", token, got, err, code)
		}
	}

	perDay := request(s, "per-day-7", japanPerDay)
	perDay.Days = proto.Int32(7)
	res2, err := p.gateway.CreateOrder(ctx, perDay)
	if err != nil {
		t.Fatal(err)
	}
	pd := res2.GetOrder()
	if pd.GetDays() != 7 || !pd.GetPerDay() || pd.GetPrice().GetUnitMinor() != 7*perDayUSD || pd.GetPrice().GetTotalMinor() != 7*perDayUSD ||
		len(pd.GetEsims()) != 1 || pd.GetEsims()[0].GetValidityDays() != 7 || !pd.GetEsims()[0].GetData().GetUnlimited() || pd.GetEsims()[0].GetData().GetTotalBytes() != 0 {
		t.Errorf("per-day order = %v", pd)
	}

	// The replay is the order as it was, and moves no money.
	before := p.balance(t, s)
	again, err := p.gateway.CreateOrder(ctx, req)
	if err != nil || !again.GetReplayed() || !proto.Equal(again.GetOrder(), o) {
		t.Errorf("replay = %v, %v; want the first order, replayed", again, err)
	}
	if after := p.balance(t, s); after != before || before != 100_000-3*japan5GBUSD-7*perDayUSD {
		t.Errorf("balance %d, then %d after the replay; want %d", before, after, 100_000-3*japan5GBUSD-7*perDayUSD)
	}

	got, err := p.gateway.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId(), Scope: s})
	if err != nil || !proto.Equal(got, o) {
		t.Errorf("GetOrder = %v, %v", got, err)
	}
	list, err := p.gateway.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: s})
	if err != nil || list.GetTotal() != 2 || list.GetOrders()[0].GetId() != pd.GetId() || !proto.Equal(list.GetOrders()[1], o) {
		t.Errorf("ListOrders = %v, %v; want both, newest first, with their eSIMs", list, err)
	}
	e := o.GetEsims()[1]
	gotE, err := p.gateway.GetEsim(ctx, &orderingv1.GetEsimRequest{Id: e.GetId(), Scope: s})
	if err != nil || !proto.Equal(gotE, e) {
		t.Errorf("GetEsim = %v, %v", gotE, err)
	}
	esims, err := p.gateway.ListEsims(ctx, &orderingv1.ListEsimsRequest{Scope: s, OrderId: o.GetId(), Limit: 2})
	if err != nil || esims.GetTotal() != 3 || len(esims.GetEsims()) != 2 {
		t.Errorf("ListEsims of the order = %v, %v", esims, err)
	}
	byICCID, err := p.gateway.ListEsims(ctx, &orderingv1.ListEsimsRequest{Scope: s, Iccid: e.GetIccid()})
	if err != nil || byICCID.GetTotal() != 1 || !proto.Equal(byICCID.GetEsims()[0], e) {
		t.Errorf("ListEsims by ICCID = %v, %v", byICCID, err)
	}
	p.checkMoney(t, s)
}

// Fifty calls at once with one key and one body: one order, one debit, and
// forty-nine answers that are its replay.
func TestConcurrentCallsWithOneKey(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	s := p.account(t, sandbox, 100_000)
	const n = 50
	res := make([]*orderingv1.CreateOrderResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { res[i], errs[i] = p.gateway.CreateOrder(ctx, request(s, "one-key", japan5GB)) })
	}
	wg.Wait()
	replays := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if res[i].GetOrder().GetId() != res[0].GetOrder().GetId() || res[i].GetOrder().GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
			t.Errorf("call %d answered order %s (%s), call 0 %s", i, res[i].GetOrder().GetId(), res[i].GetOrder().GetStatus(), res[0].GetOrder().GetId())
		}
		if res[i].GetReplayed() {
			replays++
		}
	}
	if replays != n-1 {
		t.Errorf("%d replays, want %d", replays, n-1)
	}
	orders := p.checkMoney(t, s)
	l := p.deps.Ledger(t, s.GetAccountId(), sandbox, "USD")
	if len(orders) != 1 || len(l.DebitsOf) != 1 || l.Balance != 100_000-japan5GBUSD {
		t.Errorf("%d orders, %d debits, balance %d; want 1, 1, %d", len(orders), len(l.DebitsOf), l.Balance, 100_000-japan5GBUSD)
	}
}

func TestSameKeyAnotherRequestIsRefused(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	s := p.account(t, sandbox, 100_000)
	if _, err := p.gateway.CreateOrder(ctx, request(s, "k", japan5GB)); err != nil {
		t.Fatal(err)
	}
	before := p.balance(t, s)
	for name, edit := range map[string]func(*orderingv1.CreateOrderRequest){
		"plan":      func(r *orderingv1.CreateOrderRequest) { r.PlanId = france1GB },
		"quantity":  func(r *orderingv1.CreateOrderRequest) { r.Quantity = proto.Int32(2) },
		"reference": func(r *orderingv1.CreateOrderRequest) { r.Customer.Reference = "BK-2" },
	} {
		r := request(s, "k", japan5GB)
		edit(r)
		_, err := p.gateway.CreateOrder(ctx, r)
		wantTwirp(t, "same key, other "+name, err, twirp.InvalidArgument, "argument", "Idempotency-Key")
	}
	if after := p.balance(t, s); after != before {
		t.Errorf("balance %d after the refused calls, want %d", after, before)
	}
	if orders := p.checkMoney(t, s); len(orders) != 1 {
		t.Errorf("%d orders, want 1", len(orders))
	}
}

func TestInsufficientFundsThenTopUpThenTheSameKey(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	s := p.account(t, sandbox, japan5GBUSD-1)
	_, err := p.gateway.CreateOrder(ctx, request(s, "k", japan5GB))
	wantTwirp(t, "a balance 1 short", err, twirp.FailedPrecondition, "reason", "insufficient_funds")
	if b := p.balance(t, s); b != japan5GBUSD-1 {
		t.Errorf("balance %d, want %d untouched", b, japan5GBUSD-1)
	}
	if list, _ := p.operator.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: s}); list.GetTotal() != 0 {
		t.Errorf("%d orders kept after insufficient funds", list.GetTotal())
	}
	// A balance never topped up is empty.
	none := p.account(t, sandbox, 0)
	_, err = p.gateway.CreateOrder(ctx, request(none, "k", japan5GB))
	wantTwirp(t, "no balance", err, twirp.FailedPrecondition, "reason", "insufficient_funds")

	p.deps.TopUp(t, s.GetAccountId(), sandbox, "USD", 1, "one more cent")
	res, err := p.gateway.CreateOrder(ctx, request(s, "k", japan5GB))
	if err != nil || res.GetReplayed() || res.GetOrder().GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
		t.Fatalf("after the top-up: %v, %v; want a new completed order", res, err)
	}
	if b := p.balance(t, s); b != 0 {
		t.Errorf("balance %d, want 0", b)
	}
	p.checkMoney(t, s)
}

// Two hundred orders at once against a balance that covers exactly one
// hundred: a hundred complete, a hundred are refused, and the balance ends
// at zero, never below.
func TestConcurrentOrdersNeverOverdraw(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	s := p.account(t, sandbox, 100*france1GBUSD)
	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = p.gateway.CreateOrder(ctx, request(s, fmt.Sprintf("order-%d", i), france1GB))
		})
	}
	wg.Wait()
	ok, refused := 0, 0
	for i, err := range errs {
		var twerr twirp.Error
		switch {
		case err == nil:
			ok++
		case errors.As(err, &twerr) && twerr.Code() == twirp.FailedPrecondition && twerr.Meta("reason") == "insufficient_funds":
			refused++
		default:
			t.Errorf("order %d: %v", i, err)
		}
	}
	if ok != 100 || refused != 100 {
		t.Errorf("%d completed, %d refused; want 100 and 100", ok, refused)
	}
	if b := p.balance(t, s); b != 0 {
		t.Errorf("balance %d, want 0", b)
	}
	if orders := p.checkMoney(t, s); len(orders) != 100 {
		t.Errorf("%d orders kept, want 100", len(orders))
	}
}

// A provider failure is a FAILED order, refunded in full, which the same
// key replays: the sandbox's trigger, and a live order with no live
// provider configured, exactly as an outage would be.
func TestProviderFailureIsAFailedRefundedOrder(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	for _, tc := range []struct {
		name string
		env  accountsv1.Environment
		ref  string
		msg  string
	}{
		{"sandbox trigger", sandbox, "sandbox:provider_error", "sandbox:provider_error"},
		{"live without a provider", live, "BK-1", "no live provider is configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := p.account(t, tc.env, 100_000)
			req := request(s, "k", japan5GB)
			req.Quantity = proto.Int32(2)
			req.Customer.Reference = tc.ref
			res, err := p.gateway.CreateOrder(ctx, req)
			if err != nil {
				t.Fatalf("CreateOrder: %v", err)
			}
			o := res.GetOrder()
			if o.GetStatus() != orderingv1.OrderStatus_ORDER_STATUS_FAILED || o.GetError().GetCode() != "provider_error" ||
				!strings.Contains(o.GetError().GetMessage(), tc.msg) || len(o.GetEsims()) != 0 || res.GetReplayed() {
				t.Fatalf("order = %v; want FAILED with a provider_error saying %q", o, tc.msg)
			}
			if b := p.balance(t, s); b != 100_000 {
				t.Errorf("balance %d, want 100000: refunded in full", b)
			}
			again, err := p.gateway.CreateOrder(ctx, req)
			if err != nil || !again.GetReplayed() || !proto.Equal(again.GetOrder(), o) {
				t.Errorf("replay = %v, %v; want the same FAILED order", again, err)
			}
			l := p.deps.Ledger(t, s.GetAccountId(), tc.env, "USD")
			if l.DebitsOf[o.GetId()] != 1 || l.RefundsOf[o.GetId()] != 1 {
				t.Errorf("%d debits and %d refunds of the order, want 1 and 1", l.DebitsOf[o.GetId()], l.RefundsOf[o.GetId()])
			}
			p.checkMoney(t, s)
		})
	}
}

// Every account sees only its own orders, in the environment of its key;
// an operator sees all, and alone may leave the scope out.
func TestScopes(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	mine := p.account(t, sandbox, 100_000)
	theirs := p.account(t, sandbox, 100_000)
	myLive := &orderingv1.Scope{AccountId: mine.GetAccountId(), Environment: live}
	res, err := p.gateway.CreateOrder(ctx, request(mine, "k", japan5GB))
	if err != nil {
		t.Fatal(err)
	}
	o, e := res.GetOrder(), res.GetOrder().GetEsims()[0]
	// The same key in another account is another order.
	if other, err := p.gateway.CreateOrder(ctx, request(theirs, "k", japan5GB)); err != nil || other.GetReplayed() || other.GetOrder().GetId() == o.GetId() {
		t.Errorf("the same key in another account: %v, %v", other, err)
	}

	for _, s := range []*orderingv1.Scope{theirs, myLive} {
		_, err := p.gateway.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId(), Scope: s})
		wantTwirp(t, "GetOrder in "+s.String(), err, twirp.NotFound)
		_, err = p.gateway.GetEsim(ctx, &orderingv1.GetEsimRequest{Id: e.GetId(), Scope: s})
		wantTwirp(t, "GetEsim in "+s.String(), err, twirp.NotFound)
		if l, err := p.gateway.ListEsims(ctx, &orderingv1.ListEsimsRequest{Scope: s, OrderId: o.GetId()}); err != nil || l.GetTotal() != 0 {
			t.Errorf("ListEsims of the order in %s = %v, %v", s, l, err)
		}
	}
	if l, err := p.gateway.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: myLive}); err != nil || l.GetTotal() != 0 {
		t.Errorf("live ListOrders = %v, %v; want none", l, err)
	}

	_, err = p.gateway.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId()})
	wantTwirp(t, "the gateway without a scope", err, twirp.InvalidArgument, "argument", "scope")
	_, err = p.gateway.ListOrders(ctx, &orderingv1.ListOrdersRequest{})
	wantTwirp(t, "the gateway listing without a scope", err, twirp.InvalidArgument, "argument", "scope")
	if got, err := p.operator.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId()}); err != nil || !proto.Equal(got, o) {
		t.Errorf("an operator without a scope: %v, %v", got, err)
	}
	if l, err := p.operator.ListOrders(ctx, &orderingv1.ListOrdersRequest{}); err != nil || l.GetTotal() != 2 {
		t.Errorf("an operator listing every order: %v, %v", l.GetTotal(), err)
	}
	if l, err := p.operator.ListEsims(ctx, &orderingv1.ListEsimsRequest{}); err != nil || l.GetTotal() != 2 {
		t.Errorf("an operator listing every eSIM: %v, %v", l.GetTotal(), err)
	}
	_, err = p.operator.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId(), Scope: theirs})
	wantTwirp(t, "an operator in another scope", err, twirp.NotFound)

	// The portal reads for the partner signed in, always within a scope,
	// as the gateway does: it may neither leave the scope out nor order.
	portal := orderingtest.Client(p.url, internalauth.Portal)
	if got, err := portal.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId(), Scope: mine}); err != nil || !proto.Equal(got, o) {
		t.Errorf("the portal's GetOrder = %v, %v", got, err)
	}
	if got, err := portal.GetEsim(ctx, &orderingv1.GetEsimRequest{Id: e.GetId(), Scope: mine}); err != nil || got.GetId() != e.GetId() {
		t.Errorf("the portal's GetEsim = %v, %v", got, err)
	}
	if l, err := portal.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: mine}); err != nil || l.GetTotal() != 1 {
		t.Errorf("the portal's ListOrders = %v, %v", l, err)
	}
	if l, err := portal.ListEsims(ctx, &orderingv1.ListEsimsRequest{Scope: mine}); err != nil || l.GetTotal() != 1 {
		t.Errorf("the portal's ListEsims = %v, %v", l, err)
	}
	for _, s := range []*orderingv1.Scope{theirs, myLive} {
		_, err := portal.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId(), Scope: s})
		wantTwirp(t, "the portal's GetOrder in "+s.String(), err, twirp.NotFound)
	}
	_, err = portal.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: o.GetId()})
	wantTwirp(t, "the portal without a scope", err, twirp.InvalidArgument, "argument", "scope")
	_, err = portal.ListEsims(ctx, &orderingv1.ListEsimsRequest{})
	wantTwirp(t, "the portal listing eSIMs without a scope", err, twirp.InvalidArgument, "argument", "scope")
	_, err = portal.CreateOrder(ctx, request(mine, "portal", japan5GB))
	wantTwirp(t, "the portal ordering", err, twirp.PermissionDenied)

	for _, id := range []string{"", "nope", uuid.NewString(), strings.Repeat("f", 10_000)} {
		_, err := p.gateway.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: id, Scope: mine})
		wantTwirp(t, "GetOrder "+id[:min(len(id), 8)], err, twirp.NotFound)
	}
	_, err = p.gateway.GetActivationCode(ctx, &orderingv1.GetActivationCodeRequest{QrToken: strings.Repeat("A", 43)})
	wantTwirp(t, "an unknown QR token", err, twirp.NotFound)
}

func TestRefusedInputChangesNothing(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	s := p.account(t, sandbox, 100_000)
	retired := uuid.NewString()
	for _, tc := range []struct {
		name  string
		edit  func(*orderingv1.CreateOrderRequest)
		code  twirp.ErrorCode
		field string
	}{
		{"no scope", func(r *orderingv1.CreateOrderRequest) { r.Scope = nil }, twirp.InvalidArgument, "scope"},
		{"malformed account", func(r *orderingv1.CreateOrderRequest) {
			r.Scope = &orderingv1.Scope{AccountId: "acme", Environment: sandbox}
		}, twirp.InvalidArgument, "scope.account_id"},
		{"no environment", func(r *orderingv1.CreateOrderRequest) { r.Scope = &orderingv1.Scope{AccountId: s.GetAccountId()} }, twirp.InvalidArgument, "scope.environment"},
		{"currency", func(r *orderingv1.CreateOrderRequest) { r.Currency = "JPY" }, twirp.InvalidArgument, "currency"},
		{"no plan", func(r *orderingv1.CreateOrderRequest) { r.PlanId = "" }, twirp.InvalidArgument, "plan_id"},
		{"plan not a UUID", func(r *orderingv1.CreateOrderRequest) { r.PlanId = "jp-5gb-30d" }, twirp.InvalidArgument, "plan_id"},
		{"unknown plan", func(r *orderingv1.CreateOrderRequest) { r.PlanId = retired }, twirp.NotFound, ""},
		{"quantity 0", func(r *orderingv1.CreateOrderRequest) { r.Quantity = proto.Int32(0) }, twirp.InvalidArgument, "quantity"},
		{"quantity 51", func(r *orderingv1.CreateOrderRequest) { r.Quantity = proto.Int32(51) }, twirp.InvalidArgument, "quantity"},
		{"days 366", func(r *orderingv1.CreateOrderRequest) { r.PlanId = japanPerDay; r.Days = proto.Int32(366) }, twirp.InvalidArgument, "days"},
		{"days on a fixed plan", func(r *orderingv1.CreateOrderRequest) { r.Days = proto.Int32(7) }, twirp.InvalidArgument, "days"},
		{"name 121", func(r *orderingv1.CreateOrderRequest) { r.Customer.Name = strings.Repeat("n", 121) }, twirp.InvalidArgument, "customer.name"},
		{"email", func(r *orderingv1.CreateOrderRequest) { r.Customer.Email = "ada at example.com" }, twirp.InvalidArgument, "customer.email"},
		{"reference 121", func(r *orderingv1.CreateOrderRequest) { r.Customer.Reference = strings.Repeat("r", 121) }, twirp.InvalidArgument, "customer.reference"},
		{"key 256", func(r *orderingv1.CreateOrderRequest) { r.IdempotencyKey = strings.Repeat("k", 256) }, twirp.InvalidArgument, "Idempotency-Key"},
	} {
		r := request(s, "k-"+tc.name, japan5GB)
		tc.edit(r)
		_, err := p.gateway.CreateOrder(ctx, r)
		if tc.field != "" {
			wantTwirp(t, tc.name, err, tc.code, "argument", tc.field)
		} else {
			wantTwirp(t, tc.name, err, tc.code)
		}
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"ListOrders page", func() error {
			_, err := p.gateway.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: s, Page: 10_001})
			return err
		}, "page"},
		{"ListOrders limit", func() error {
			_, err := p.gateway.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: s, Limit: 101})
			return err
		}, "limit"},
		{"ListOrders status", func() error {
			_, err := p.gateway.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: s, Status: 9})
			return err
		}, "status"},
		{"ListEsims order", func() error {
			_, err := p.gateway.ListEsims(ctx, &orderingv1.ListEsimsRequest{Scope: s, OrderId: "x"})
			return err
		}, "order_id"},
		{"ListEsims iccid", func() error {
			_, err := p.gateway.ListEsims(ctx, &orderingv1.ListEsimsRequest{Scope: s, Iccid: "89x"})
			return err
		}, "iccid"},
	} {
		wantTwirp(t, tc.name, tc.call(), twirp.InvalidArgument, "argument", tc.field)
	}
	if b := p.balance(t, s); b != 100_000 {
		t.Errorf("balance %d after refused calls, want 100000", b)
	}
	if orders := p.checkMoney(t, s); len(orders) != 0 {
		t.Errorf("%d orders after refused calls", len(orders))
	}
}

// Calls without a valid credential, or from a caller the policy does not
// name, are refused before reaching the service, and change nothing.
func TestInternalCallsNeedACredential(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	s := p.account(t, sandbox, 100_000)
	for _, tc := range []struct {
		name   string
		client orderingv1.Ordering
		code   twirp.ErrorCode
	}{
		{"no credential", orderingv1.NewOrderingProtobufClient(p.url, &http.Client{}), twirp.Unauthenticated},
		{"a wrong token", orderingv1.NewOrderingProtobufClient(p.url, internalauth.Client(&http.Client{}, internalauth.NewToken())), twirp.Unauthenticated},
		{"an operator ordering", p.operator, twirp.PermissionDenied},
		{"ordering calling itself", orderingtest.Client(p.url, internalauth.Ordering), twirp.PermissionDenied},
	} {
		_, err := tc.client.CreateOrder(ctx, request(s, "k", japan5GB))
		wantTwirp(t, tc.name+": CreateOrder", err, tc.code)
		if tc.code == twirp.Unauthenticated {
			_, err := tc.client.ListOrders(ctx, &orderingv1.ListOrdersRequest{Scope: s})
			wantTwirp(t, tc.name+": ListOrders", err, tc.code)
		}
	}
	_, err := p.operator.GetActivationCode(ctx, &orderingv1.GetActivationCodeRequest{QrToken: strings.Repeat("A", 43)})
	wantTwirp(t, "an operator reading an activation code", err, twirp.PermissionDenied)
	if b := p.balance(t, s); b != 100_000 {
		t.Errorf("balance %d after refused calls", b)
	}
	if orders := p.checkMoney(t, s); len(orders) != 0 {
		t.Errorf("%d orders after refused calls", len(orders))
	}
}

// GetOrders answers every lookup as GetOrder would, in one call: found in
// its own scope only, empty for another scope, an unknown or malformed id;
// the whole call is refused for a missing or malformed scope or a batch
// out of bounds.
func TestGetOrdersAnswersEachLookupInItsScope(t *testing.T) {
	ctx := context.Background()
	p := start(t)
	mine := p.account(t, sandbox, 100_000)
	theirs := p.account(t, sandbox, 100_000)
	var orders []*orderingv1.Order
	for _, key := range []string{"a", "b"} {
		res, err := p.gateway.CreateOrder(ctx, request(mine, key, japan5GB))
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, res.GetOrder())
	}
	lookups := []*orderingv1.GetOrderRequest{
		{Id: orders[0].GetId(), Scope: mine}, {Id: orders[0].GetId(), Scope: theirs}, {Id: "nope", Scope: mine},
		{Id: uuid.NewString(), Scope: mine}, {Id: orders[1].GetId(), Scope: mine},
	}
	res, err := p.gateway.GetOrders(ctx, &orderingv1.GetOrdersRequest{Lookups: lookups})
	if err != nil {
		t.Fatal(err)
	}
	want := []*orderingv1.Order{orders[0], nil, nil, nil, orders[1]}
	if len(res.GetResults()) != len(want) {
		t.Fatalf("%d results for %d lookups", len(res.GetResults()), len(want))
	}
	for i, r := range res.GetResults() {
		if !proto.Equal(r.GetOrder(), want[i]) {
			t.Errorf("lookup %d: %v, want %v", i, r.GetOrder(), want[i])
		}
	}
	// One lookup takes GetOrder's path; it answers the same.
	if one, err := p.gateway.GetOrders(ctx, &orderingv1.GetOrdersRequest{Lookups: lookups[:1]}); err != nil || !proto.Equal(one.GetResults()[0].GetOrder(), orders[0]) {
		t.Errorf("one lookup: %v, %v", one, err)
	}

	tooMany := make([]*orderingv1.GetOrderRequest, ordering.MaxOrderLookups+1)
	for i := range tooMany {
		tooMany[i] = lookups[0]
	}
	for _, tc := range []struct {
		name    string
		lookups []*orderingv1.GetOrderRequest
		field   string
	}{
		{"no lookup", nil, "lookups"},
		{"too many", tooMany, "lookups"},
		{"no scope", []*orderingv1.GetOrderRequest{lookups[0], {Id: orders[0].GetId()}}, "lookups[1].scope"},
		{"a malformed account", []*orderingv1.GetOrderRequest{{Id: orders[0].GetId(), Scope: &orderingv1.Scope{AccountId: "x", Environment: sandbox}}}, "scope.account_id"},
	} {
		_, err := p.gateway.GetOrders(ctx, &orderingv1.GetOrdersRequest{Lookups: tc.lookups})
		wantTwirp(t, "GetOrders with "+tc.name, err, twirp.InvalidArgument, "argument", tc.field)
	}
	// Even an operator names each lookup's scope.
	_, err = p.operator.GetOrders(ctx, &orderingv1.GetOrdersRequest{Lookups: []*orderingv1.GetOrderRequest{{Id: orders[0].GetId()}}})
	wantTwirp(t, "an operator's GetOrders without a scope", err, twirp.InvalidArgument, "argument", "lookups[0].scope")
}
