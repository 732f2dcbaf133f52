// Package twirpserver serves the ordering Service over Twirp: it translates
// between the protobuf contract in proto/ordering/v1 and the domain, and
// nothing else.
package twirpserver

import (
	"context"
	"log/slog"
	"math"
	"net/http"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/twirperr"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering"
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
	twirpHandler := orderingv1.NewOrderingServer(New(svc), twirp.WithServerHooks(twirperr.ServerHooks(log)))
	return internalauth.Protect(twirpHandler, callers, Policy, log)
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
	return &orderingv1.CreateOrderResponse{Order: OrderToProto(created.Order), Replayed: created.Replayed}, nil
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
	return OrderToProto(o), nil
}

// ListOrders implements orderingv1.Ordering.
func (s *Server) ListOrders(ctx context.Context, req *orderingv1.ListOrdersRequest) (*orderingv1.ListOrdersResponse, error) {
	scope, err := readScope(ctx, req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	var status ordering.Status
	switch req.GetStatus() {
	case orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED:
	case orderingv1.OrderStatus_ORDER_STATUS_PENDING:
		status = ordering.StatusPending
	case orderingv1.OrderStatus_ORDER_STATUS_COMPLETED:
		status = ordering.StatusCompleted
	case orderingv1.OrderStatus_ORDER_STATUS_FAILED:
		status = ordering.StatusFailed
	default:
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
		resp.Orders[i] = OrderToProto(o)
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
	return esimToProto(e), nil
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
		Scope: scope, OrderID: orderID, ICCID: req.GetIccid(), Page: req.GetPage(), Limit: req.GetLimit(),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &orderingv1.ListEsimsResponse{
		Esims: make([]*orderingv1.Esim, len(page.Esims)),
		Total: int32(min(page.Total, math.MaxInt32)),
	}
	for i, e := range page.Esims {
		resp.Esims[i] = esimToProto(e)
	}
	return resp, nil
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
	c, err := s.svc.CheckProvider(ctx, environmentFromProto(req.GetEnvironment()))
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
	return &ordering.Scope{AccountID: id, Environment: environmentFromProto(s.GetEnvironment())}, nil
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

// OrderToProto is o as the API shows it; the events ordering publishes
// carry it too, so that a consumer sees an order as GetOrder answers it.
func OrderToProto(o ordering.Order) *orderingv1.Order {
	po := &orderingv1.Order{
		Id:          o.ID.String(),
		AccountId:   o.Scope.AccountID.String(),
		Environment: environmentToProto(o.Scope.Environment),
		PlanId:      o.PlanID.String(),
		Quantity:    o.Quantity,
		Days:        o.Days,
		Status:      statusToProto(o.Status),
		Price:       &orderingv1.Price{UnitMinor: o.UnitMinor, TotalMinor: o.TotalMinor, Currency: string(o.Currency)},
		Customer:    &orderingv1.Customer{Name: o.Customer.Name, Email: o.Customer.Email, Reference: o.Customer.Reference},
		CreatedAt:   timestamppb.New(o.CreatedAt),
		Esims:       make([]*orderingv1.Esim, len(o.Esims)),
		PerDay:      o.PerDay,
	}
	// A failing order is still being refunded: PENDING, without its error
	// until the refund is done.
	if o.Status == ordering.StatusFailed && o.Error != nil {
		po.Error = &orderingv1.OrderError{Code: o.Error.Code, Message: o.Error.Message}
	}
	for i, e := range o.Esims {
		po.Esims[i] = esimToProto(e)
	}
	return po
}

func esimToProto(e ordering.Esim) *orderingv1.Esim {
	return &orderingv1.Esim{
		Id:             e.ID.String(),
		OrderId:        e.OrderID.String(),
		PlanName:       e.PlanName,
		Iccid:          e.ICCID,
		QrCodeUrl:      e.QRCodeURL,
		ActivationCode: e.ActivationCode,
		SmdpAddress:    e.SMDPAddress,
		MatchingId:     e.MatchingID,
		Status:         e.Status,
		ValidityDays:   e.ValidityDays,
		Data: &orderingv1.EsimData{
			Unlimited:  e.Data.Unlimited,
			TotalBytes: e.Data.TotalBytes,
			UsedBytes:  e.Data.UsedBytes,
			UpdatedAt:  timestamppb.New(e.Data.UpdatedAt),
		},
		Install: &orderingv1.Install{
			Instructions:         e.Install.Instructions,
			IosUniversalLink:     e.Install.IOSUniversalLink,
			AndroidUniversalLink: e.Install.AndroidUniversalLink,
		},
		CreatedAt: timestamppb.New(e.CreatedAt),
	}
}

func statusToProto(s ordering.Status) orderingv1.OrderStatus {
	switch s {
	case ordering.StatusPending, ordering.StatusFailing:
		return orderingv1.OrderStatus_ORDER_STATUS_PENDING
	case ordering.StatusCompleted:
		return orderingv1.OrderStatus_ORDER_STATUS_COMPLETED
	case ordering.StatusFailed:
		return orderingv1.OrderStatus_ORDER_STATUS_FAILED
	}
	return orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED
}

// environmentFromProto maps unknown enum values to "", which the domain
// rejects as a validation error on scope.environment.
// environmentFromProto spells e as the domain does ("sandbox", "live");
// the zero value, or a newer one, becomes a name the domain refuses.
func environmentFromProto(e accountsv1.Environment) ordering.Environment {
	return ordering.Environment(e.ShortName())
}

func environmentToProto(e ordering.Environment) accountsv1.Environment {
	pe, _ := accountsv1.EnvironmentByShortName(string(e))
	return pe
}
