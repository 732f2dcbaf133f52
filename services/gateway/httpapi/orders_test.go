package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/proto/partnerapi"
	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/twirpclient"
)

// orderingServer answers as an ordering service whose one order is
// order: every read finds it or its eSIMs, and so does CreateOrder.
type orderingServer struct {
	orderingv1.Ordering // any other method panics: the tests call none
	order               *orderingv1.Order
}

func (s orderingServer) CreateOrder(context.Context, *orderingv1.CreateOrderRequest) (*orderingv1.CreateOrderResponse, error) {
	return &orderingv1.CreateOrderResponse{Order: s.order}, nil
}

func (s orderingServer) GetOrder(context.Context, *orderingv1.GetOrderRequest) (*orderingv1.Order, error) {
	return s.order, nil
}

func (s orderingServer) GetOrders(_ context.Context, req *orderingv1.GetOrdersRequest) (*orderingv1.GetOrdersResponse, error) {
	res := &orderingv1.GetOrdersResponse{}
	for range req.GetLookups() {
		res.Results = append(res.Results, &orderingv1.OrderLookup{Order: s.order})
	}
	return res, nil
}

func (s orderingServer) ListOrders(context.Context, *orderingv1.ListOrdersRequest) (*orderingv1.ListOrdersResponse, error) {
	return &orderingv1.ListOrdersResponse{Orders: []*orderingv1.Order{s.order}, Total: 1}, nil
}

func (s orderingServer) GetEsim(context.Context, *orderingv1.GetEsimRequest) (*orderingv1.Esim, error) {
	return s.order.GetEsims()[0], nil
}

func (s orderingServer) ListEsims(context.Context, *orderingv1.ListEsimsRequest) (*orderingv1.ListEsimsResponse, error) {
	return &orderingv1.ListEsimsResponse{Esims: s.order.GetEsims(), Total: int32(len(s.order.GetEsims()))}, nil
}

// orderingAPI is the public API reading orders through the gateway's
// ordering client from an ordering that answers o.
func orderingAPI(t *testing.T, o *orderingv1.Order) (http.Handler, *backends) {
	t.Helper()
	srv := httptest.NewServer(orderingv1.NewOrderingServer(orderingServer{order: o}))
	t.Cleanup(srv.Close)
	b := &backends{}
	return New(Deps{
		Gate:      gateway.Gate{Accounts: b, Limiter: b, DefaultRateLimit: 1000},
		Catalogue: b, Wallet: b, Events: b,
		Orders: twirpclient.NewOrdering(srv.URL, srv.Client(), srv.Client(), 10*time.Second, nil),
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}), b
}

// storedOrder is an order as ordering answers it, with what tempts an
// encoder to differ: <, > and & in text, a null customer field, days.
func storedOrder() *orderingv1.Order {
	at := timestamppb.New(time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.UTC))
	id := "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c"
	return &orderingv1.Order{
		Id: id, AccountId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4d", Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX,
		PlanId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4e", Quantity: 1, Days: 2, PerDay: true,
		Status:    orderingv1.OrderStatus_ORDER_STATUS_COMPLETED,
		Price:     &orderingv1.Price{UnitMinor: 1300, TotalMinor: 1300, Currency: "USD"},
		Customer:  &orderingv1.Customer{Name: "Zoë <Z> & co", Reference: "BK-1"},
		CreatedAt: at,
		Esims: []*orderingv1.Esim{{
			Id: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4f", OrderId: id, PlanName: "Japan unlimited",
			Iccid: "8988247000000000004", QrCodeUrl: "https://api.example.com/v1/qr/tok.png?size=300&x=<y>",
			ActivationCode: "LPA:1$smdp.example$M-1", SmdpAddress: "smdp.example", MatchingId: "M-1", Status: "ALLOCATED", ValidityDays: 2,
			Data:      &orderingv1.EsimData{Unlimited: true, UpdatedAt: at},
			Install:   &orderingv1.Install{Instructions: "Settings > Mobile & Data > Add eSIM", IosUniversalLink: "https://esimsetup.apple.com/x?a=1&b=2", AndroidUniversalLink: "https://esimsetup.android.com/x"},
			CreatedAt: at,
		}},
	}
}

// The order the API answers is, byte for byte, the data of the webhook
// event for it: the webhook service's consumer renders an event's data as
// partnerapi.Marshal(partnerapi.OrderFromProto(order)) (its delivery
// tests hold it to that), and so does GET /v1/orders/{id}, the list of
// orders and the order a POST answers; an eSIM likewise as EsimFromProto.
func TestOrdersAreTheWebhooksBytes(t *testing.T) {
	o := storedOrder()
	h, b := orderingAPI(t, o)
	rendered, err := partnerapi.OrderFromProto(o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := partnerapi.Marshal(rendered)
	if err != nil {
		t.Fatal(err)
	}
	renderedEsim, err := partnerapi.EsimFromProto(o.GetEsims()[0])
	if err != nil {
		t.Fatal(err)
	}
	esim, err := partnerapi.Marshal(renderedEsim)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("<Z> & co")) {
		t.Fatalf("the webhook's data escapes text: %s", data)
	}
	paging := []byte(`,"pagination":{"page":1,"limit":20,"total":1,"has_more":false}}` + "\n")
	for path, want := range map[string][]byte{
		"/v1/orders/" + o.GetId():              append(append([]byte(`{"data":`), data...), "}\n"...),
		"/v1/orders":                           append(append(append([]byte(`{"data":[`), data...), ']'), paging...),
		"/v1/esims/" + o.GetEsims()[0].GetId(): append(append([]byte(`{"data":`), esim...), "}\n"...),
		"/v1/esims?order_id=" + o.GetId():      append(append(append([]byte(`{"data":[`), esim...), ']'), paging...),
	} {
		a := serve(t, h, b, httptest.NewRequest(http.MethodGet, path, nil))
		if a.status != http.StatusOK || !bytes.Equal(a.raw, want) {
			t.Errorf("GET %s: %d\n%s\nwant\n%s", path, a.status, a.raw, want)
		}
	}
	a := postOrder(t, h, b, []byte(`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4e","days":2}`))
	if want := append(append([]byte(`{"data":`), data...), "}\n"...); a.status != http.StatusCreated || !bytes.Equal(a.raw, want) {
		t.Errorf("POST /v1/orders: %d\n%s\nwant\n%s", a.status, a.raw, want)
	}
}

// An order whose status or environment the partner API does not define
// (a newer ordering's) is a 500 internal_error wherever it would be
// shown, never an order with another value in its place: what the
// webhook service does with one too (it holds the event).
func TestAnOrderWithAValueTheAPIDoesNotDefineIsAnInternalError(t *testing.T) {
	for name, change := range map[string]func(*orderingv1.Order){
		"status 7":       func(o *orderingv1.Order) { o.Status = 7 },
		"no status":      func(o *orderingv1.Order) { o.Status = orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED },
		"environment 7":  func(o *orderingv1.Order) { o.Environment = 7 },
		"no environment": func(o *orderingv1.Order) { o.Environment = accountsv1.Environment_ENVIRONMENT_UNSPECIFIED },
	} {
		o := proto.Clone(storedOrder()).(*orderingv1.Order)
		change(o)
		h, b := orderingAPI(t, o)
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/v1/orders/"+o.GetId(), nil),
			httptest.NewRequest(http.MethodGet, "/v1/orders", nil),
			httptest.NewRequest(http.MethodPost, "/v1/orders", bytes.NewReader([]byte(`{"plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4e"}`))),
		} {
			req.Header.Set("Content-Type", "application/json")
			if a := serve(t, h, b, req); a.status != http.StatusInternalServerError || a.err.Code != "internal_error" {
				t.Errorf("%s: %s %s = %d %s; want 500 internal_error", name, req.Method, req.URL, a.status, a.raw)
			}
		}
	}
}
