// Package twirpserver serves the ordering Service over Twirp: it translates
// between the protobuf contract in proto/ordering/v1 and the domain (orders
// and eSIMs through orderingpb, which the Kafka publisher shares), and
// nothing else.
package twirpserver

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/orderingpb"
)

// Server implements orderingv1.Ordering.
type Server struct {
	svc *ordering.Service
}

var _ orderingv1.Ordering = (*Server)(nil)

// New returns the Twirp implementation over svc.
func New(svc *ordering.Service) *Server {
	return &Server{svc: svc}
}

// Handler returns the Twirp HTTP handler of the Ordering service, mounted
// at its default path prefix (/twirp/esim.ordering.v1.Ordering/), serving
// only the callers Policy admits. Its hooks log internal errors and calls
// cut short, whose causes callers never see.
func Handler(svc *ordering.Service, log *slog.Logger, callers internalauth.Callers) http.Handler {
	return service.Twirp(orderingv1.NewOrderingServer, orderingv1.Ordering(New(svc)), log, callers, Policy)
}

// CreateOrder implements orderingv1.Ordering.
func (s *Server) CreateOrder(ctx context.Context, req *orderingv1.CreateOrderRequest) (*orderingv1.CreateOrderResponse, error) {
	if req.GetScope() == nil {
		// Whoever orders, orders for someone: not even an operator may
		// leave the scope out here.
		return nil, toTwirp(&ordering.ValidationError{Field: "scope", Reason: "is required"})
	}
	scope, err := scopeFromProto(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	c := req.GetCustomer()
	created, err := s.svc.CreateOrder(ctx, ordering.NewOrder{
		Scope:          *scope,
		Currency:       ordering.Currency(req.GetCurrency()),
		IdempotencyKey: req.GetIdempotencyKey(),
		PlanID:         req.GetPlanId(),
		Quantity:       req.Quantity,
		Days:           req.Days,
		Customer:       ordering.Customer{Name: c.GetName(), Email: c.GetEmail(), Reference: c.GetReference()},
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return &orderingv1.CreateOrderResponse{Order: orderingpb.Order(created.Order), Replayed: created.Replayed}, nil
}

// GetOrder implements orderingv1.Ordering.
func (s *Server) GetOrder(ctx context.Context, req *orderingv1.GetOrderRequest) (*orderingv1.Order, error) {
	scope, err := readScope(ctx, req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	id, err := lookupID(req.GetId())
	if err != nil {
		return nil, toTwirp(err)
	}
	o, err := s.svc.GetOrder(ctx, scope, id)
	if err != nil {
		return nil, toTwirp(err)
	}
	return orderingpb.Order(o), nil
}

// GetOrders implements orderingv1.Ordering. Unlike GetOrder's, every
// lookup's scope is required: a shared read is never one of any scope.
func (s *Server) GetOrders(ctx context.Context, req *orderingv1.GetOrdersRequest) (*orderingv1.GetOrdersResponse, error) {
	if len(req.GetLookups()) == 0 || len(req.GetLookups()) > ordering.MaxOrderLookups {
		return nil, toTwirp(&ordering.ValidationError{Field: "lookups", Reason: fmt.Sprintf("want 1 to %d", ordering.MaxOrderLookups)})
	}
	lookups := make([]ordering.OrderLookup, 0, len(req.GetLookups()))
	results := make([]*orderingv1.OrderLookup, len(req.GetLookups()))
	// A malformed id finds nothing, as GetOrder's does: it is left out of
	// the read and its result stays empty.
	asked := make([]int, 0, len(req.GetLookups()))
	for i, l := range req.GetLookups() {
		results[i] = &orderingv1.OrderLookup{}
		if l.GetScope() == nil {
			return nil, toTwirp(&ordering.ValidationError{Field: fmt.Sprintf("lookups[%d].scope", i), Reason: "is required"})
		}
		scope, err := scopeFromProto(l.GetScope())
		if err != nil {
			return nil, toTwirp(err)
		}
		if id, err := lookupID(l.GetId()); err == nil {
			lookups = append(lookups, ordering.OrderLookup{Scope: *scope, ID: id})
			asked = append(asked, i)
		}
	}
	if len(lookups) == 0 {
		return &orderingv1.GetOrdersResponse{Results: results}, nil
	}
	orders, err := s.svc.GetOrders(ctx, lookups)
	if err != nil {
		return nil, toTwirp(err)
	}
	for j, o := range orders {
		if o != nil {
			results[asked[j]].Order = orderingpb.Order(*o)
		}
	}
	return &orderingv1.GetOrdersResponse{Results: results}, nil
}

// ListOrders implements orderingv1.Ordering.
func (s *Server) ListOrders(ctx context.Context, req *orderingv1.ListOrdersRequest) (*orderingv1.ListOrdersResponse, error) {
	scope, err := readScope(ctx, req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	status, ok := orderingpb.StatusFromProto(req.GetStatus())
	if !ok {
		return nil, toTwirp(&ordering.ValidationError{Field: "status", Reason: "must be pending, completed or failed"})
	}
	page, err := s.svc.ListOrders(ctx, ordering.OrderFilter{
		Scope: scope, Status: status, Reference: req.GetReference(), Page: req.GetPage(), Limit: req.GetLimit(),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &orderingv1.ListOrdersResponse{
		Orders: make([]*orderingv1.Order, len(page.Orders)),
		// Saturated rather than wrapped, should it ever not fit.
		Total: int32(min(page.Total, math.MaxInt32)),
	}
	for i, o := range page.Orders {
		resp.Orders[i] = orderingpb.Order(o)
	}
	return resp, nil
}

// GetEsim implements orderingv1.Ordering.
func (s *Server) GetEsim(ctx context.Context, req *orderingv1.GetEsimRequest) (*orderingv1.Esim, error) {
	scope, err := readScope(ctx, req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	id, err := lookupID(req.GetId())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.GetEsim(ctx, scope, id)
	if err != nil {
		return nil, toTwirp(err)
	}
	return orderingpb.Esim(e), nil
}

// ListEsims implements orderingv1.Ordering.
func (s *Server) ListEsims(ctx context.Context, req *orderingv1.ListEsimsRequest) (*orderingv1.ListEsimsResponse, error) {
	scope, err := readScope(ctx, req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	var orderID uuid.UUID
	if req.GetOrderId() != "" {
		// A filter, not a lookup: a malformed id is the caller's input
		// error, not an empty page.
		if orderID, err = uuid.Parse(req.GetOrderId()); err != nil || len(req.GetOrderId()) != 36 {
			return nil, toTwirp(&ordering.ValidationError{Field: "order_id", Reason: "must be a UUID"})
		}
	}
	page, err := s.svc.ListEsims(ctx, ordering.EsimFilter{
		Scope: scope, OrderID: orderID, ICCID: req.GetIccid(), Status: req.GetStatus(), Page: req.GetPage(), Limit: req.GetLimit(),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &orderingv1.ListEsimsResponse{
		Esims: make([]*orderingv1.Esim, len(page.Esims)),
		Total: int32(min(page.Total, math.MaxInt32)),
	}
	for i, e := range page.Esims {
		resp.Esims[i] = orderingpb.Esim(e)
	}
	return resp, nil
}

// Search implements orderingv1.Ordering.
func (s *Server) Search(ctx context.Context, req *orderingv1.SearchRequest) (*orderingv1.SearchResponse, error) {
	if req.GetScope() == nil {
		// A search is a partner's: not even an operator searches every
		// account at once.
		return nil, toTwirp(&ordering.ValidationError{Field: "scope", Reason: "is required"})
	}
	scope, err := scopeFromProto(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	found, err := s.svc.Search(ctx, ordering.Search{Scope: *scope, Query: req.GetQuery(), Limit: req.GetLimit()})
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &orderingv1.SearchResponse{
		Orders: make([]*orderingv1.Order, len(found.Orders)),
		Esims:  make([]*orderingv1.Esim, len(found.Esims)),
		More:   found.More,
	}
	for i, o := range found.Orders {
		resp.Orders[i] = orderingpb.Order(o)
	}
	for i, e := range found.Esims {
		resp.Esims[i] = orderingpb.Esim(e)
	}
	for _, t := range found.TopUps {
		resp.Topups = append(resp.Topups, orderingpb.TopUp(t))
	}
	return resp, nil
}

// CreateTopUp implements orderingv1.Ordering.
func (s *Server) CreateTopUp(ctx context.Context, req *orderingv1.CreateTopUpRequest) (*orderingv1.CreateTopUpResponse, error) {
	if req.GetScope() == nil {
		return nil, toTwirp(&ordering.ValidationError{Field: "scope", Reason: "is required"})
	}
	scope, err := scopeFromProto(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	esimID, err := lookupID(req.GetEsimId())
	if err != nil {
		return nil, toTwirp(err)
	}
	created, err := s.svc.CreateTopUp(ctx, ordering.NewTopUp{
		Scope:          *scope,
		Currency:       ordering.Currency(req.GetCurrency()),
		IdempotencyKey: req.GetIdempotencyKey(),
		EsimID:         esimID,
		PlanID:         req.GetPlanId(),
		Days:           req.Days,
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return &orderingv1.CreateTopUpResponse{Topup: orderingpb.TopUp(created.TopUp), Replayed: created.Replayed}, nil
}

// SimulateEsim implements orderingv1.Ordering.
func (s *Server) SimulateEsim(ctx context.Context, req *orderingv1.SimulateEsimRequest) (*orderingv1.Esim, error) {
	if req.GetScope() == nil {
		return nil, toTwirp(&ordering.ValidationError{Field: "scope", Reason: "is required"})
	}
	scope, err := scopeFromProto(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	id, err := lookupID(req.GetEsimId())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.Simulate(ctx, *scope, id, ordering.Simulation{Action: req.GetAction(), Bytes: req.Bytes})
	if err != nil {
		return nil, toTwirp(err)
	}
	return orderingpb.Esim(e), nil
}

// GetActivationCode implements orderingv1.Ordering.
func (s *Server) GetActivationCode(ctx context.Context, req *orderingv1.GetActivationCodeRequest) (*orderingv1.GetActivationCodeResponse, error) {
	code, err := s.svc.ActivationCode(ctx, req.GetQrToken())
	if err != nil {
		return nil, toTwirp(err)
	}
	return &orderingv1.GetActivationCodeResponse{ActivationCode: code}, nil
}

// CheckProvider implements orderingv1.Ordering.
func (s *Server) CheckProvider(ctx context.Context, req *orderingv1.CheckProviderRequest) (*orderingv1.CheckProviderResponse, error) {
	c, err := s.svc.CheckProvider(ctx, orderingpb.EnvironmentFromProto(req.GetEnvironment()))
	if err != nil {
		return nil, toTwirp(err)
	}
	return &orderingv1.CheckProviderResponse{Provider: c.Provider, Target: c.Target, Ok: c.OK, Detail: c.Detail}, nil
}

// readScope is the scope of a read: required, except from an operator,
// for whom none means every account and environment.
func readScope(ctx context.Context, s *orderingv1.Scope) (*ordering.Scope, error) {
	if s == nil {
		if caller, _ := internalauth.CallerFrom(ctx); caller == internalauth.Operator {
			return nil, nil
		}
		return nil, &ordering.ValidationError{Field: "scope", Reason: "is required"}
	}
	return scopeFromProto(s)
}

// scopeFromProto parses a scope the caller sent. Its account id names
// whose data to read or write, so a malformed one is an input error
// rather than a lookup miss.
func scopeFromProto(s *orderingv1.Scope) (*ordering.Scope, error) {
	id, err := uuid.Parse(s.GetAccountId())
	if err != nil || len(s.GetAccountId()) != 36 {
		return nil, &ordering.ValidationError{Field: "scope.account_id", Reason: "must be a UUID"}
	}
	return &ordering.Scope{AccountID: id, Environment: orderingpb.EnvironmentFromProto(s.GetEnvironment())}, nil
}

// lookupID parses the id of something that must already exist. A
// malformed id cannot name anything, so it is ErrNotFound, exactly like an
// unknown one.
func lookupID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, ordering.ErrNotFound
	}
	return id, nil
}
