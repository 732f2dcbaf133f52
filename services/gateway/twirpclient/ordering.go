package twirpclient

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/libs/coalesce"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/proto/partnerapi"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	"github.com/esimplatform/esim/services/gateway"
)

// Ordering places and reads orders with the ordering service, and answers
// them as partnerapi renders them for partners (httpapi.Orders).
type Ordering struct {
	client orderingv1.Ordering
	// orders is the client for CreateOrder, whose HTTP client waits as
	// long as issuing may take.
	orders orderingv1.Ordering
	// reads coalesces GetOrder, as Catalogue's plans do.
	reads   *coalesce.Batcher[orderLookup, *orderingv1.Order]
	timeout time.Duration
}

// orderLookup is one caller's GetOrder.
type orderLookup struct {
	req    *orderingv1.GetOrderRequest
	caller trace.SpanContext
}

// CoalescedGetOrdersSpan names the span of a GetOrders call shared by
// several reads.
const CoalescedGetOrdersSpan = "ordering.GetOrders coalesced"

// OrderReadsInFlight is how many GetOrders calls one gateway keeps
// outstanding; reads beyond them share the next. One, as for plans: every
// call saved is a wake-up of ordering and of Postgres saved.
const OrderReadsInFlight = 1

// NewOrdering returns a client of the ordering service at baseURL: hc for
// reads, create for placing orders.
//
// Order reads are coalesced as plan lookups are (NewCatalogue): one made
// while ordering is idle goes out alone; those made while earlier ones are
// in flight share one GetOrders call, each lookup in its own partner's
// scope. timeout bounds a read from the moment it is made, its wait for a
// call included; observe, when not nil, hears of every GetOrders call.
func NewOrdering(baseURL string, hc, create *http.Client, timeout time.Duration, observe coalesce.Observer) *Ordering {
	o := &Ordering{
		client:  orderingv1.NewOrderingProtobufClient(baseURL, hc),
		orders:  orderingv1.NewOrderingProtobufClient(baseURL, create),
		timeout: timeout,
	}
	o.reads = coalesce.New(o.getOrders, coalesce.Options{MaxBatch: OrderLookupsPerGet, MaxInFlight: OrderReadsInFlight, Observe: observe})
	return o
}

// OrderLookupsPerGet is the most reads one GetOrders call carries:
// ordering's bound.
const OrderLookupsPerGet = 100

// getOrders answers each lookup with its order, or nil where ordering
// found none in the lookup's scope.
func (o *Ordering) getOrders(ctx context.Context, batch []orderLookup) ([]*orderingv1.Order, error) {
	req := &orderingv1.GetOrdersRequest{Lookups: make([]*orderingv1.GetOrderRequest, len(batch))}
	callers := make([]trace.SpanContext, len(batch))
	for i, l := range batch {
		req.Lookups[i], callers[i] = l.req, l.caller
	}
	ctx, end := batchSpan(ctx, CoalescedGetOrdersSpan, callers, "esim.order_lookups")
	defer end()
	res, err := o.client.GetOrders(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(res.GetResults()) != len(batch) {
		return nil, fmt.Errorf("ordering: GetOrders answered %d results for %d lookups", len(res.GetResults()), len(batch))
	}
	out := make([]*orderingv1.Order, len(batch))
	for i, r := range res.GetResults() {
		out[i] = r.GetOrder()
	}
	return out, nil
}

func scope(p gateway.Principal) *orderingv1.Scope {
	return &orderingv1.Scope{AccountId: p.AccountID, Environment: environment(p.Environment)}
}

func environment(e gateway.Environment) accountsv1.Environment {
	env, _ := accountsv1.EnvironmentByShortName(string(e))
	return env
}

func optional(n *int) *int32 {
	if n == nil {
		return nil
	}
	// Out of int32's range is out of every bound ordering checks, and is
	// sent as such rather than wrapped into range.
	v := int32(max(min(*n, math.MaxInt32), math.MinInt32))
	return &v
}

// CreateOrder implements httpapi.Orders.
func (o *Ordering) CreateOrder(ctx context.Context, p gateway.Principal, in gateway.NewOrder) (partnerapi.Order, bool, error) {
	res, err := o.orders.CreateOrder(ctx, &orderingv1.CreateOrderRequest{
		Scope:          scope(p),
		Currency:       p.Currency,
		IdempotencyKey: in.IdempotencyKey,
		PlanId:         in.PlanID,
		Quantity:       optional(in.Quantity),
		Days:           optional(in.Days),
		Customer:       &orderingv1.Customer{Name: in.Customer.Name, Email: in.Customer.Email, Reference: in.Customer.Reference},
	})
	if err != nil {
		return partnerapi.Order{}, false, translate("ordering", err)
	}
	order, err := orderFromProto(res.GetOrder())
	return order, res.GetReplayed(), err
}

// GetOrder implements httpapi.Orders.
func (o *Ordering) GetOrder(ctx context.Context, p gateway.Principal, id string) (partnerapi.Order, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res, err := o.reads.Do(ctx, orderLookup{req: &orderingv1.GetOrderRequest{Id: id, Scope: scope(p)}, caller: trace.SpanContextFromContext(ctx)})
	if err != nil {
		return partnerapi.Order{}, translate("ordering", err)
	}
	if res == nil {
		return partnerapi.Order{}, gateway.ErrNotFound
	}
	return orderFromProto(res)
}

// ListOrders implements httpapi.Orders.
func (o *Ordering) ListOrders(ctx context.Context, p gateway.Principal, q gateway.OrderQuery) ([]partnerapi.Order, int, error) {
	status := orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED
	if q.Status != "" {
		status = orderingv1.OrderStatus(orderingv1.OrderStatus_value["ORDER_STATUS_"+strings.ToUpper(string(q.Status))])
	}
	res, err := o.client.ListOrders(ctx, &orderingv1.ListOrdersRequest{
		Scope: scope(p), Page: int32(q.Page), Limit: int32(q.Limit), Status: status, Reference: q.Reference,
	})
	if err != nil {
		return nil, 0, translate("ordering", err)
	}
	orders := make([]partnerapi.Order, len(res.GetOrders()))
	for i, po := range res.GetOrders() {
		if orders[i], err = orderFromProto(po); err != nil {
			return nil, 0, err
		}
	}
	return orders, int(res.GetTotal()), nil
}

// GetEsim implements httpapi.Orders.
func (o *Ordering) GetEsim(ctx context.Context, p gateway.Principal, id string) (partnerapi.Esim, error) {
	res, err := o.client.GetEsim(ctx, &orderingv1.GetEsimRequest{Id: id, Scope: scope(p)})
	if err != nil {
		return partnerapi.Esim{}, translate("ordering", err)
	}
	return partnerapi.EsimFromProto(res)
}

// ListEsims implements httpapi.Orders.
func (o *Ordering) ListEsims(ctx context.Context, p gateway.Principal, q gateway.EsimQuery) ([]partnerapi.Esim, int, error) {
	res, err := o.client.ListEsims(ctx, &orderingv1.ListEsimsRequest{
		Scope: scope(p), Page: int32(q.Page), Limit: int32(q.Limit), OrderId: q.OrderID, Iccid: q.ICCID, Status: q.Status,
	})
	if err != nil {
		return nil, 0, translate("ordering", err)
	}
	esims := make([]partnerapi.Esim, len(res.GetEsims()))
	for i, e := range res.GetEsims() {
		if esims[i], err = partnerapi.EsimFromProto(e); err != nil {
			return nil, 0, err
		}
	}
	return esims, int(res.GetTotal()), nil
}

// CreateTopUp implements httpapi.Orders.
func (o *Ordering) CreateTopUp(ctx context.Context, p gateway.Principal, in gateway.NewTopUp) (partnerapi.TopUp, bool, error) {
	res, err := o.orders.CreateTopUp(ctx, &orderingv1.CreateTopUpRequest{
		Scope:          scope(p),
		Currency:       p.Currency,
		IdempotencyKey: in.IdempotencyKey,
		EsimId:         in.EsimID,
		PlanId:         in.PlanID,
		Days:           optional(in.Days),
	})
	if err != nil {
		return partnerapi.TopUp{}, false, translate("ordering", err)
	}
	topUp, err := partnerapi.TopUpFromProto(res.GetTopup())
	if err != nil {
		return partnerapi.TopUp{}, false, fmt.Errorf("ordering: %w", err)
	}
	return topUp, res.GetReplayed(), nil
}

// EsimCoverage implements httpapi.Orders.
func (o *Ordering) EsimCoverage(ctx context.Context, p gateway.Principal, id string) (gateway.EsimCoverage, error) {
	res, err := o.client.GetEsim(ctx, &orderingv1.GetEsimRequest{Id: id, Scope: scope(p)})
	if err != nil {
		return gateway.EsimCoverage{}, translate("ordering", err)
	}
	c := gateway.EsimCoverage{Type: gateway.Fixed, Countries: res.GetCountries()}
	if res.GetPerDay() {
		c.Type = gateway.PerDay
	}
	return c, nil
}

// SimulateEsim implements httpapi.Orders.
func (o *Ordering) SimulateEsim(ctx context.Context, p gateway.Principal, id string, sim gateway.Simulation) (partnerapi.Esim, error) {
	res, err := o.client.SimulateEsim(ctx, &orderingv1.SimulateEsimRequest{Scope: scope(p), EsimId: id, Action: sim.Action, Bytes: sim.Bytes})
	if err != nil {
		return partnerapi.Esim{}, translate("ordering", err)
	}
	return partnerapi.EsimFromProto(res)
}

// ActivationCode implements httpapi.Orders.
func (o *Ordering) ActivationCode(ctx context.Context, token string) (string, error) {
	res, err := o.client.GetActivationCode(ctx, &orderingv1.GetActivationCodeRequest{QrToken: token})
	if err != nil {
		return "", translate("ordering", err)
	}
	return res.GetActivationCode(), nil
}

// orderFromProto is o as the partner API shows it, or an internal error
// for a status or environment this gateway's contract does not define
// (a newer ordering's), as knownEnums does for plans.
func orderFromProto(o *orderingv1.Order) (partnerapi.Order, error) {
	order, err := partnerapi.OrderFromProto(o)
	if err != nil {
		return partnerapi.Order{}, fmt.Errorf("ordering: %w", err)
	}
	return order, nil
}

// Wallet reads balances from the wallet service.
type Wallet struct {
	client walletv1.Wallet
}

// NewWallet returns a client of the wallet service at baseURL.
func NewWallet(baseURL string, hc *http.Client) *Wallet {
	return &Wallet{client: walletv1.NewWalletProtobufClient(baseURL, hc)}
}

// Balance implements gateway.Wallet.
func (w *Wallet) Balance(ctx context.Context, p gateway.Principal) (gateway.Balance, error) {
	res, err := w.client.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: p.AccountID, Environment: environment(p.Environment), Currency: p.Currency})
	if err != nil {
		return gateway.Balance{}, translate("wallet", err)
	}
	return gateway.Balance{AmountMinor: res.GetAmountMinor(), Currency: res.GetCurrency(), Environment: p.Environment}, nil
}
