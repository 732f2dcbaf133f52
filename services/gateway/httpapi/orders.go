package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/esimplatform/esim/proto/limits"
	"github.com/esimplatform/esim/proto/partnerapi"

	"github.com/danielgtaylor/huma/v2"

	"github.com/esimplatform/esim/services/gateway"
)

// OrderRequest is the body of POST /orders. Absent and zero are told
// apart: a quantity of 0 is refused, an absent one means 1.
type OrderRequest struct {
	PlanID   string           `json:"plan_id" format:"uuid" doc:"A plan id from GET /v1/plans." example:"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c"`
	Quantity *int             `json:"quantity,omitempty" doc:"eSIMs to issue; 1 when left out. Each is a profile of its own."`
	Days     *int             `json:"days,omitempty" doc:"Days of a per-day plan; 1 when left out. On a fixed plan only 1 is accepted."`
	Customer *CustomerRequest `json:"customer,omitempty" doc:"Your traveller and booking, kept for your reporting."`
}

// CustomerRequest is who the order is for, as the partner records it.
type CustomerRequest struct {
	Name      *string `json:"name,omitempty" doc:"Traveller name."`
	Email     *string `json:"email,omitempty" format:"email" doc:"Traveller email address."`
	Reference *string `json:"reference,omitempty" doc:"Your booking reference. In the sandbox, sandbox:provider_error makes issuing fail."`
}

// orderBounds gives POST /orders' body the bounds of proto/limits, which
// ordering enforces, for the document and for huma's checks alike (a
// struct tag cannot name a constant), so one answer names every field out
// of range before ordering is called.
func orderBounds(oapi *huma.OpenAPI, op *huma.Operation) {
	if op.OperationID != "create-order" {
		return
	}
	schemas := oapi.Components.Schemas.Map()
	order, customer := schemas["OrderRequest"], schemas["CustomerRequest"]
	if order == nil || customer == nil {
		panic("httpapi: OrderRequest and CustomerRequest must be registered before their bounds are set")
	}
	between := func(s *huma.Schema, lowest, highest int, doc string) {
		lo, hi := float64(lowest), float64(highest)
		s.Minimum, s.Maximum = &lo, &hi
		s.Description += fmt.Sprintf(" %s %d to %d.", doc, lowest, highest)
		s.PrecomputeMessages()
	}
	atMost := func(s *huma.Schema, n int) {
		s.MaxLength = &n
		s.Description += fmt.Sprintf(" Up to %d characters.", n)
		s.PrecomputeMessages()
	}
	between(order.Properties["quantity"], 1, limits.MaxQuantity, "From")
	between(order.Properties["days"], 1, limits.MaxDays, "From")
	atMost(customer.Properties["name"], limits.MaxCustomerText)
	atMost(customer.Properties["email"], limits.MaxEmailLength)
	atMost(customer.Properties["reference"], limits.MaxCustomerText)
}

// The partner API's order and eSIM documents are partnerapi's, which the
// webhook service sends too.
type (
	Order       = partnerapi.Order
	OrderPrice  = partnerapi.OrderPrice
	Customer    = partnerapi.Customer
	OrderError  = partnerapi.OrderError
	Esim        = partnerapi.Esim
	EsimData    = partnerapi.EsimData
	EsimInstall = partnerapi.EsimInstall
)

// Orders places and reads orders. Every call but ActivationCode is scoped
// to the principal's account and environment: another's id is
// gateway.ErrNotFound. Orders and eSIMs come rendered by
// partnerapi.OrderFromProto and EsimFromProto, which render a webhook's
// data too, and the API writes them with partnerapi.Encode: GET
// /v1/orders/{id}'s data and an order.completed event's are one
// rendering, the same bytes.
type Orders interface {
	// CreateOrder answers the order and whether an earlier request with
	// the same idempotency key made it. A failed order is an answer, not
	// an error; gateway.ErrInsufficientFunds, gateway.ErrNotFound (the
	// plan) and a *gateway.ValidationError are the errors a partner can
	// fix.
	CreateOrder(ctx context.Context, p gateway.Principal, in gateway.NewOrder) (order Order, replayed bool, err error)
	GetOrder(ctx context.Context, p gateway.Principal, id string) (Order, error)
	ListOrders(ctx context.Context, p gateway.Principal, q gateway.OrderQuery) (orders []Order, total int, err error)
	GetEsim(ctx context.Context, p gateway.Principal, id string) (Esim, error)
	ListEsims(ctx context.Context, p gateway.Principal, q gateway.EsimQuery) (esims []Esim, total int, err error)
	// CreateTopUp answers the top-up and whether an earlier request with
	// the same idempotency key made it, as CreateOrder does: a failed
	// top-up is an answer; gateway.ErrNotFound is the eSIM or the plan.
	CreateTopUp(ctx context.Context, p gateway.Principal, in gateway.NewTopUp) (topUp TopUp, replayed bool, err error)
	// EsimCoverage is what a plan must match to top up the eSIM.
	EsimCoverage(ctx context.Context, p gateway.Principal, id string) (gateway.EsimCoverage, error)
	// SimulateEsim moves a sandbox eSIM; gateway.ErrNotFound in live.
	SimulateEsim(ctx context.Context, p gateway.Principal, id string, sim gateway.Simulation) (Esim, error)
	// ActivationCode is what the QR image of token encodes;
	// gateway.ErrNotFound for a token no eSIM has.
	ActivationCode(ctx context.Context, token string) (string, error)
}

// BalanceView is the prepaid balance of the key's account and environment.
type BalanceView struct {
	Amount      Amount `json:"amount"`
	Currency    string `json:"currency" enum:"USD,EUR,GBP"`
	Environment string `json:"environment" enum:"sandbox,live"`
}

type createOrderInput struct {
	StrictQuery
	IdempotencyKey string `header:"Idempotency-Key" doc:"Up to 255 printable ASCII characters. A retry with the same key and body replays the first answer and never charges twice; send one with every order."`
	Body           OrderRequest
}

// Resolve refuses an Idempotency-Key that is not one (idempotencyKeyFault).
func (in *createOrderInput) Resolve(ctx huma.Context) []error {
	return append(in.StrictQuery.Resolve(ctx), idempotencyKeyFault(ctx, in.IdempotencyKey)...)
}

// idempotencyKeyFault refuses an Idempotency-Key that is not one: given
// twice, too long, or not printable ASCII.
func idempotencyKeyFault(ctx huma.Context, key string) []error {
	var values []string
	ctx.EachHeader(func(name, value string) {
		if strings.EqualFold(name, "Idempotency-Key") {
			values = append(values, value)
		}
	})
	reason := ""
	switch {
	case len(values) > 1:
		reason = "given more than once"
	case len(key) > limits.MaxIdempotencyKey:
		reason = fmt.Sprintf("want at most %d characters", limits.MaxIdempotencyKey)
	case strings.ContainsFunc(key, func(r rune) bool { return r < ' ' || r > '~' }):
		reason = "want printable ASCII characters only"
	}
	if reason == "" {
		return nil
	}
	return []error{&huma.ErrorDetail{Location: "header.Idempotency-Key", Message: reason}}
}

// inFlightMessage answers an order over its account's cap of orders in
// flight.
const inFlightMessage = "Too many orders of this account are being processed in this environment; nothing was charged. Retry after the seconds in Retry-After, with the same Idempotency-Key."

type createOrderOutput struct {
	Status   int
	Location string `header:"Location"`
	Replay   string `header:"Idempotent-Replay" doc:"true when this answers an earlier request with the same Idempotency-Key."`
	Body     Envelope[Order]
}

type listOrdersInput struct {
	StrictQuery
	PageParams
	Status    string `query:"status" enum:"pending,completed,failed" doc:"Only orders in this status."`
	Reference string `query:"reference" maxLength:"120" doc:"Only orders with this customer.reference."`
}

type listOrdersOutput struct {
	Body ListEnvelope[Order]
}

type getOrderInput struct {
	StrictQuery
	ID string `path:"id" doc:"Order id (UUID) from POST /v1/orders."`
}

type getOrderOutput struct {
	Body Envelope[Order]
}

type listEsimsInput struct {
	StrictQuery
	PageParams
	OrderID string `query:"order_id" doc:"Only the eSIMs of this order."`
	ICCID   string `query:"iccid" doc:"Only the eSIM with this ICCID."`
	Status  string `query:"status" enum:"ALLOCATED,INSTALLED,ACTIVE,DEPLETED,EXPIRED" doc:"Only eSIMs in this status."`
}

type listEsimsOutput struct {
	Body ListEnvelope[Esim]
}

type getEsimInput struct {
	StrictQuery
	ID string `path:"id" doc:"eSIM id (UUID) from an order."`
}

type getEsimOutput struct {
	Body Envelope[Esim]
}

type getBalanceInput struct {
	StrictQuery
}

type getBalanceOutput struct {
	Body Envelope[BalanceView]
}

var orderErrors = []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusPaymentRequired, http.StatusNotFound,
	http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway}

func (a *handlers) registerOrders(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID:   "create-order",
		Method:        http.MethodPost,
		Path:          "/orders",
		Summary:       "Order eSIMs",
		Description:   "Buys 1 to 50 eSIMs of a plan, debits the balance and answers every eSIM with its QR code, activation code and install steps. 201 for a new order; 200 with `Idempotent-Replay: true` for a retry with the same `Idempotency-Key` and body, which is never charged again. A failed issue answers 502 `provider_error` after refunding the order in full.",
		Tags:          []string{"Orders"},
		Security:      bearerAuth,
		DefaultStatus: http.StatusCreated,
		Errors:        orderErrors,
		Responses: map[string]*huma.Response{
			"200": {Description: "A replay of an earlier request with the same Idempotency-Key: the same order, not charged again."},
		},
	}, a.createOrder)

	huma.Register(api, huma.Operation{
		OperationID: "list-orders",
		Method:      http.MethodGet,
		Path:        "/orders",
		Summary:     "List orders",
		Description: "Orders of this environment, newest first, each with its eSIMs.",
		Tags:        []string{"Orders"},
		Security:    bearerAuth,
		Errors:      readErrors,
	}, a.listOrders)

	huma.Register(api, huma.Operation{
		OperationID: "get-order",
		Method:      http.MethodGet,
		Path:        "/orders/{id}",
		Summary:     "Get an order",
		Description: "The order with every eSIM it issued. Another account's or environment's order, an unknown id and a malformed id alike are not_found.",
		Tags:        []string{"Orders"},
		Security:    bearerAuth,
		Errors:      append([]int{http.StatusNotFound}, readErrors...),
	}, a.getOrder)

	huma.Register(api, huma.Operation{
		OperationID: "list-esims",
		Method:      http.MethodGet,
		Path:        "/esims",
		Summary:     "List eSIMs",
		Description: "eSIMs of this environment, newest first.",
		Tags:        []string{"eSIMs"},
		Security:    bearerAuth,
		Errors:      readErrors,
	}, a.listEsims)

	huma.Register(api, huma.Operation{
		OperationID: "get-esim",
		Method:      http.MethodGet,
		Path:        "/esims/{id}",
		Summary:     "Get an eSIM",
		Description: "Another account's or environment's eSIM, an unknown id and a malformed id alike are not_found.",
		Tags:        []string{"eSIMs"},
		Security:    bearerAuth,
		Errors:      append([]int{http.StatusNotFound}, readErrors...),
	}, a.getEsim)

	huma.Register(api, huma.Operation{
		OperationID: "get-balance",
		Method:      http.MethodGet,
		Path:        "/balance",
		Summary:     "Get the balance",
		Description: "The prepaid balance of this account in this environment; orders are debited from it.",
		Tags:        []string{"Balance"},
		Security:    bearerAuth,
		Errors:      readErrors,
	}, a.getBalance)
}

func (a *handlers) createOrder(ctx context.Context, in *createOrderInput) (*createOrderOutput, error) {
	req := gateway.NewOrder{
		PlanID:         in.Body.PlanID,
		Quantity:       in.Body.Quantity,
		Days:           in.Body.Days,
		IdempotencyKey: in.IdempotencyKey,
	}
	if c := in.Body.Customer; c != nil {
		req.Customer = gateway.Customer{Name: deref(c.Name), Email: deref(c.Email), Reference: deref(c.Reference)}
	}
	order, replayed, err := a.Orders.CreateOrder(ctx, principalFrom(ctx), req)
	failed := ""
	if err == nil && order.Status == partnerapi.OrderFailed {
		failed = fmt.Sprintf("Issuing failed (%s); order %s was refunded in full. Place a new order with a new Idempotency-Key.", order.Error.Message, order.ID)
	}
	status, replay, err := a.purchased(ctx, err, fmt.Sprintf("No plan %q on sale. GET /v1/plans lists the plans you can order.", in.Body.PlanID), replayed, failed)
	if err != nil {
		return nil, err
	}
	return &createOrderOutput{Status: status, Location: basePath + "/orders/" + order.ID, Replay: replay, Body: Envelope[Order]{Data: order}}, nil
}

func (a *handlers) listOrders(ctx context.Context, in *listOrdersInput) (*listOrdersOutput, error) {
	page := in.orDefaults()
	orders, total, err := a.Orders.ListOrders(ctx, principalFrom(ctx), gateway.OrderQuery{
		Status: gateway.OrderStatus(in.Status), Reference: in.Reference, Page: page.Page, Limit: page.Limit,
	})
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	return &listOrdersOutput{Body: ListEnvelope[Order]{Data: orEmpty(orders), Pagination: in.pagination(total)}}, nil
}

func (a *handlers) getOrder(ctx context.Context, in *getOrderInput) (*getOrderOutput, error) {
	id, ok := canonicalID(in.ID)
	var order Order
	err := gateway.ErrNotFound
	if ok {
		order, err = a.Orders.GetOrder(ctx, principalFrom(ctx), id)
	}
	if errors.Is(err, gateway.ErrNotFound) {
		return nil, fromDomain(ctx, withMessage(err, fmt.Sprintf("No order %q in this environment.", in.ID)))
	}
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	return &getOrderOutput{Body: Envelope[Order]{Data: order}}, nil
}

func (a *handlers) listEsims(ctx context.Context, in *listEsimsInput) (*listEsimsOutput, error) {
	var bad []gateway.FieldError
	if _, ok := canonicalID(in.OrderID); in.OrderID != "" && !ok {
		bad = append(bad, gateway.FieldError{Field: "order_id", Reason: "want an order id (a UUID)"})
	}
	if in.ICCID != "" && (len(in.ICCID) < 18 || len(in.ICCID) > 22 || strings.ContainsFunc(in.ICCID, func(r rune) bool { return r < '0' || r > '9' })) {
		bad = append(bad, gateway.FieldError{Field: "iccid", Reason: "want an ICCID: 18 to 22 digits"})
	}
	if len(bad) > 0 {
		return nil, fromDomain(ctx, &gateway.ValidationError{Fields: bad})
	}
	page := in.orDefaults()
	esims, total, err := a.Orders.ListEsims(ctx, principalFrom(ctx), gateway.EsimQuery{
		OrderID: strings.ToLower(in.OrderID), ICCID: in.ICCID, Status: in.Status, Page: page.Page, Limit: page.Limit,
	})
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	return &listEsimsOutput{Body: ListEnvelope[Esim]{Data: orEmpty(esims), Pagination: in.pagination(total)}}, nil
}

func (a *handlers) getEsim(ctx context.Context, in *getEsimInput) (*getEsimOutput, error) {
	id, ok := canonicalID(in.ID)
	var esim Esim
	err := gateway.ErrNotFound
	if ok {
		esim, err = a.Orders.GetEsim(ctx, principalFrom(ctx), id)
	}
	if errors.Is(err, gateway.ErrNotFound) {
		return nil, fromDomain(ctx, withMessage(err, fmt.Sprintf("No eSIM %q in this environment.", in.ID)))
	}
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	return &getEsimOutput{Body: Envelope[Esim]{Data: esim}}, nil
}

func (a *handlers) getBalance(ctx context.Context, _ *getBalanceInput) (*getBalanceOutput, error) {
	b, err := a.Wallet.Balance(ctx, principalFrom(ctx))
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	return &getBalanceOutput{Body: Envelope[BalanceView]{Data: BalanceView{
		Amount: Amount(b.AmountMinor), Currency: b.Currency, Environment: string(b.Environment),
	}}}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// orNull is s, or null when empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// orEmpty is s, or an empty slice for nil: an empty page's data is [],
// not null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// purchased answers a purchase (an order, a top-up) as ordering took it:
// err mapped (not found with notFound's message; over the account's
// orders in flight with Retry-After), a failed purchase (failed: why) as
// 502 provider_error, refunded, and otherwise 201, or 200 on a replay. A
// replay's answer, failed or not, carries Idempotent-Replay.
func (a *handlers) purchased(ctx context.Context, err error, notFound string, replayed bool, failed string) (status int, replay string, _ error) {
	switch {
	case errors.Is(err, gateway.ErrNotFound):
		err = withMessage(err, notFound)
	case errors.Is(err, gateway.ErrRateLimited):
		// Not the key's allowance but the account's orders in flight: the
		// same Idempotency-Key goes through once one of them ends.
		return 0, "", huma.ErrorWithHeaders(a.problem(ctx, withMessage(err, inFlightMessage)), http.Header{"Retry-After": {retryAfter}})
	}
	if err != nil {
		return 0, "", a.problem(ctx, err)
	}
	if replayed {
		replay = "true"
	}
	if failed != "" {
		failure := fromDomain(ctx, withMessage(gateway.ErrProviderFailed, failed))
		if replayed {
			return 0, "", huma.ErrorWithHeaders(failure, http.Header{"Idempotent-Replay": {replay}})
		}
		return 0, "", failure
	}
	if replayed {
		return http.StatusOK, replay, nil
	}
	return http.StatusCreated, replay, nil
}
