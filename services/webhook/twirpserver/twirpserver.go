// Package twirpserver serves the webhook Service over Twirp: it translates
// between the protobuf contract in proto/webhook/v1 and the domain, and
// nothing else. Who may call which method is Policy's.
package twirpserver

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook"
)

// Server implements webhookv1.Webhook.
type Server struct {
	svc *webhook.Service
}

var _ webhookv1.Webhook = (*Server)(nil)

// New returns the Twirp implementation over svc.
func New(svc *webhook.Service) *Server {
	return &Server{svc: svc}
}

// Handler returns the Twirp HTTP handler of the Webhook service, mounted
// at its default path prefix (/twirp/esim.webhook.v1.Webhook/), serving
// only the callers Policy admits. Its hooks log internal errors and calls
// cut short, whose causes callers never see.
func Handler(svc *webhook.Service, log *slog.Logger, callers internalauth.Callers) http.Handler {
	return service.Twirp(webhookv1.NewWebhookServer, webhookv1.Webhook(New(svc)), log, callers, Policy)
}

// SetEndpoint implements webhookv1.Webhook.
func (s *Server) SetEndpoint(ctx context.Context, req *webhookv1.SetEndpointRequest) (*webhookv1.Endpoint, error) {
	scope, err := requiredScope(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.SetEndpoint(ctx, scope, req.GetUrl())
	if err != nil {
		return nil, toTwirp(err)
	}
	return endpointToProto(e), nil
}

// GetEndpoint implements webhookv1.Webhook.
func (s *Server) GetEndpoint(ctx context.Context, req *webhookv1.GetEndpointRequest) (*webhookv1.Endpoint, error) {
	scope, err := requiredScope(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.GetEndpoint(ctx, scope)
	if err != nil {
		return nil, toTwirp(err)
	}
	return endpointToProto(e), nil
}

// RotateSecret implements webhookv1.Webhook.
func (s *Server) RotateSecret(ctx context.Context, req *webhookv1.RotateSecretRequest) (*webhookv1.Endpoint, error) {
	scope, err := requiredScope(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.RotateSecret(ctx, scope)
	if err != nil {
		return nil, toTwirp(err)
	}
	return endpointToProto(e), nil
}

// SendTestEvent implements webhookv1.Webhook.
func (s *Server) SendTestEvent(ctx context.Context, req *webhookv1.SendTestEventRequest) (*webhookv1.Event, error) {
	scope, err := requiredScope(req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.SendTestEvent(ctx, scope)
	if err != nil {
		return nil, toTwirp(err)
	}
	return eventToProto(e), nil
}

// ListEvents implements webhookv1.Webhook.
func (s *Server) ListEvents(ctx context.Context, req *webhookv1.ListEventsRequest) (*webhookv1.ListEventsResponse, error) {
	scope, err := readScope(ctx, req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	var orderID uuid.UUID
	if req.GetOrderId() != "" {
		// A filter, not a lookup: a malformed id is the caller's input
		// error, not an empty page.
		if orderID, err = uuid.Parse(req.GetOrderId()); err != nil || len(req.GetOrderId()) != 36 {
			return nil, toTwirp(&webhook.ValidationError{Field: "order_id", Reason: "must be a UUID"})
		}
	}
	status, ok := statusFromProto(req.GetStatus())
	if !ok {
		return nil, toTwirp(&webhook.ValidationError{Field: "status", Reason: "must be pending, delivered, failed or no_endpoint"})
	}
	page, err := s.svc.ListEvents(ctx, webhook.EventFilter{
		Scope: scope, Type: webhook.EventType(req.GetType()), OrderID: orderID, Status: status,
		Page: req.GetPage(), Limit: req.GetLimit(),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &webhookv1.ListEventsResponse{Events: make([]*webhookv1.Event, len(page.Events)), Total: page.Total}
	for i, e := range page.Events {
		resp.Events[i] = eventToProto(e)
	}
	return resp, nil
}

// GetEvent implements webhookv1.Webhook.
func (s *Server) GetEvent(ctx context.Context, req *webhookv1.GetEventRequest) (*webhookv1.Event, error) {
	scope, err := readScope(ctx, req.GetScope())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.GetEvent(ctx, scope, req.GetId())
	if err != nil {
		return nil, toTwirp(err)
	}
	return eventToProto(e), nil
}

// requiredScope is the scope of a call that writes or reads one scope's
// endpoint: required from every caller.
func requiredScope(s *webhookv1.Scope) (webhook.Scope, error) {
	if s == nil {
		return webhook.Scope{}, &webhook.ValidationError{Field: "scope", Reason: "is required"}
	}
	return scopeFromProto(s)
}

// readScope is the scope of a read of events: required, except from an
// operator, for whom none means every account and environment.
func readScope(ctx context.Context, s *webhookv1.Scope) (*webhook.Scope, error) {
	if s == nil {
		if caller, _ := internalauth.CallerFrom(ctx); caller == internalauth.Operator {
			return nil, nil
		}
		return nil, &webhook.ValidationError{Field: "scope", Reason: "is required"}
	}
	scope, err := scopeFromProto(s)
	if err != nil {
		return nil, err
	}
	return &scope, nil
}

// scopeFromProto parses a scope the caller sent. Its account id names
// whose data to read or write, so a malformed one is an input error
// rather than a lookup miss.
func scopeFromProto(s *webhookv1.Scope) (webhook.Scope, error) {
	id, err := uuid.Parse(s.GetAccountId())
	if err != nil || len(s.GetAccountId()) != 36 {
		return webhook.Scope{}, &webhook.ValidationError{Field: "scope.account_id", Reason: "must be a UUID"}
	}
	// The zero value, or a newer one, becomes a name the domain refuses.
	return webhook.Scope{AccountID: id, Environment: webhook.Environment(s.GetEnvironment().ShortName())}, nil
}

func scopeToProto(s webhook.Scope) *webhookv1.Scope {
	env, _ := accountsv1.EnvironmentByShortName(string(s.Environment))
	return &webhookv1.Scope{AccountId: s.AccountID.String(), Environment: env}
}

func endpointToProto(e webhook.Endpoint) *webhookv1.Endpoint {
	pe := &webhookv1.Endpoint{
		Scope:           scopeToProto(e.Scope),
		Url:             e.URL,
		Secret:          e.Secret,
		SecretCreatedAt: timestamppb.New(e.SecretCreatedAt),
		UpdatedAt:       timestamppb.New(e.UpdatedAt),
	}
	if !e.PreviousSecretExpiresAt.IsZero() {
		pe.PreviousSecretExpiresAt = timestamppb.New(e.PreviousSecretExpiresAt)
	}
	return pe
}

// inProgress stands in the error of an attempt still in flight, whose
// empty error would otherwise read as a success.
const inProgress = "in progress"

func eventToProto(e webhook.Event) *webhookv1.Event {
	pe := &webhookv1.Event{
		Id:        e.ID,
		Type:      string(e.Type),
		Scope:     scopeToProto(e.Scope),
		CreatedAt: timestamppb.New(e.CreatedAt),
		Status:    statusToProto(e.Status),
		Url:       e.URL,
		Payload:   string(e.Payload),
		Attempts:  make([]*webhookv1.Attempt, len(e.Attempts)),
	}
	if e.OrderID != uuid.Nil {
		pe.OrderId = e.OrderID.String()
	}
	for i, a := range e.Attempts {
		pa := &webhookv1.Attempt{
			Number:     int32(a.Number),
			StartedAt:  timestamppb.New(a.StartedAt),
			DurationMs: a.Duration.Milliseconds(),
			StatusCode: int32(a.StatusCode),
			Error:      a.Error,
			// A receiver's answer need not be text; protobuf strings
			// must be UTF-8.
			ResponseBody: strings.ToValidUTF8(string(a.ResponseBody), "\uFFFD"),
			RequestBody:  string(e.Payload),
		}
		if !a.Finished {
			pa.Error = inProgress
		}
		pe.Attempts[i] = pa
	}
	return pe
}

func statusToProto(s webhook.Status) webhookv1.DeliveryStatus {
	switch s {
	case webhook.StatusPending:
		return webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING
	case webhook.StatusDelivered:
		return webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED
	case webhook.StatusFailed:
		return webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED
	case webhook.StatusNoEndpoint:
		return webhookv1.DeliveryStatus_DELIVERY_STATUS_NO_ENDPOINT
	}
	return webhookv1.DeliveryStatus_DELIVERY_STATUS_UNSPECIFIED
}

// statusFromProto maps a status filter; UNSPECIFIED is none (""), and a
// value this build does not know is not ok.
func statusFromProto(s webhookv1.DeliveryStatus) (webhook.Status, bool) {
	switch s {
	case webhookv1.DeliveryStatus_DELIVERY_STATUS_UNSPECIFIED:
		return "", true
	case webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING:
		return webhook.StatusPending, true
	case webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED:
		return webhook.StatusDelivered, true
	case webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED:
		return webhook.StatusFailed, true
	case webhookv1.DeliveryStatus_DELIVERY_STATUS_NO_ENDPOINT:
		return webhook.StatusNoEndpoint, true
	}
	return "", false
}
