// Package twirpserver serves the catalogue's Twirp contract
// (proto/catalogue/v1) over the domain Service.
package twirpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/services/catalogue"
)

// Server implements cataloguev1.Catalogue.
type Server struct {
	svc *catalogue.Service
	log *slog.Logger
}

var _ cataloguev1.Catalogue = (*Server)(nil)

// New returns the Twirp adapter over svc; log records what upserts did.
func New(svc *catalogue.Service, log *slog.Logger) *Server {
	return &Server{svc: svc, log: log}
}

// Handler returns the Twirp HTTP handler of the Catalogue service, mounted
// at its default path prefix (/twirp/esim.catalogue.v1.Catalogue/),
// serving only the callers Policy admits. Its hooks log internal errors
// and calls cut short, whose causes callers never see.
func Handler(svc *catalogue.Service, log *slog.Logger, callers internalauth.Callers) http.Handler {
	return service.Twirp(cataloguev1.NewCatalogueServer, cataloguev1.Catalogue(New(svc, log)), log, callers, Policy)
}

// ListPlans implements cataloguev1.Catalogue.
func (s *Server) ListPlans(ctx context.Context, req *cataloguev1.ListPlansRequest) (*cataloguev1.ListPlansResponse, error) {
	f := catalogue.ListFilter{
		Country:  req.GetCountry(),
		Covers:   req.GetCovers(),
		Currency: catalogue.Currency(req.GetCurrency()),
		Page:     int(req.GetPage()),
		Limit:    int(req.GetLimit()),
	}
	if t := req.GetType(); t != cataloguev1.PlanType_PLAN_TYPE_UNSPECIFIED {
		var known bool
		if f.Type, known = planTypes[t]; !known {
			return nil, toTwirp(&catalogue.ValidationError{Field: "type", Reason: "must be fixed or per_day"})
		}
	}
	page, err := s.svc.ListPlans(ctx, f)
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &cataloguev1.ListPlansResponse{
		Plans: make([]*cataloguev1.Plan, len(page.Plans)),
		Total: int32(page.Total),
	}
	for i, p := range page.Plans {
		resp.Plans[i] = planToProto(p)
	}
	return resp, nil
}

// GetPlan implements cataloguev1.Catalogue.
func (s *Server) GetPlan(ctx context.Context, req *cataloguev1.GetPlanRequest) (*cataloguev1.Plan, error) {
	id, err := planID(req.GetId())
	if err != nil {
		return nil, toTwirp(err)
	}
	p, err := s.svc.GetPlan(ctx, id, req.GetIncludeRetired())
	if err != nil {
		return nil, toTwirp(err)
	}
	return planToProto(p), nil
}

// GetPlans implements cataloguev1.Catalogue.
func (s *Server) GetPlans(ctx context.Context, req *cataloguev1.GetPlansRequest) (*cataloguev1.GetPlansResponse, error) {
	// A malformed id names no plan, as GetPlan answers: it is looked up as
	// uuid.Nil, which no plan has (Plan.Validate refuses it), and so left
	// out. Every id counts towards the service's bound, malformed or not.
	ids := make([]uuid.UUID, len(req.GetIds()))
	for i, raw := range req.GetIds() {
		if id, err := planID(raw); err == nil {
			ids[i] = id
		}
	}
	plans, err := s.svc.GetPlans(ctx, ids, req.GetIncludeRetired())
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &cataloguev1.GetPlansResponse{Plans: make([]*cataloguev1.Plan, len(plans))}
	for i, p := range plans {
		resp.Plans[i] = planToProto(p)
	}
	return resp, nil
}

// UpsertPlans implements cataloguev1.Catalogue. The answer counts every
// plan of the request: each is now stored as given, whether it was created,
// replaced or already identical.
func (s *Server) UpsertPlans(ctx context.Context, req *cataloguev1.UpsertPlansRequest) (*cataloguev1.UpsertPlansResponse, error) {
	plans := make([]catalogue.Plan, len(req.GetPlans()))
	for i, pb := range req.GetPlans() {
		p, err := planFromProto(pb)
		if err != nil {
			return nil, toTwirp(catalogue.InField(fmt.Sprintf("plans[%d]", i), err))
		}
		plans[i] = p
	}
	res, err := s.svc.UpsertPlans(ctx, plans)
	if err != nil {
		return nil, toTwirp(err)
	}
	s.log.InfoContext(ctx, "plans upserted", "created", res.Created, "updated", res.Updated, "unchanged", res.Unchanged)
	return &cataloguev1.UpsertPlansResponse{
		Upserted: int32(res.Total()),
		Created:  int32(res.Created), Updated: int32(res.Updated), Unchanged: int32(res.Unchanged),
	}, nil
}

// RetirePlan implements cataloguev1.Catalogue.
func (s *Server) RetirePlan(ctx context.Context, req *cataloguev1.RetirePlanRequest) (*cataloguev1.Plan, error) {
	id, err := planID(req.GetId())
	if err != nil {
		return nil, toTwirp(err)
	}
	p, err := s.svc.RetirePlan(ctx, id)
	if err != nil {
		return nil, toTwirp(err)
	}
	s.log.InfoContext(ctx, "plan retired", "plan_id", p.ID)
	return planToProto(p), nil
}

// planID parses the id of a plan to look up. A string that is not a UUID
// names no plan, so it is not_found like any unknown id (the public API
// answers a malformed id in a path the same way).
func planID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, catalogue.ErrNotFound
	}
	return id, nil
}
