package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/esimplatform/esim/proto/limits"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/esimplatform/esim/services/gateway"
)

// Plan is a catalogue plan priced in the caller's account currency.
type Plan struct {
	ID       string   `json:"id" format:"uuid"`
	Name     string   `json:"name" example:"Japan 5 GB, 30 days"`
	Type     string   `json:"type" enum:"fixed,per_day" doc:"fixed: a data amount valid for validity_days; per_day: unlimited data priced per day ordered."`
	Coverage Coverage `json:"coverage"`
	Data     PlanData `json:"data"`
	// Pointers because the contract says null, not 0, where a value does
	// not apply.
	ValidityDays *int   `json:"validity_days" nullable:"true" doc:"Days the eSIM stays valid; null on per-day plans, where it is the days ordered."`
	Price        Price  `json:"price" doc:"Price in the account's currency: of the whole plan on fixed plans, of one day on per-day plans."`
	Status       string `json:"status" enum:"active"`
}

// Coverage says where a plan works.
type Coverage struct {
	Scope     string   `json:"scope" enum:"country,region,global"`
	Countries []string `json:"countries" doc:"ISO 3166-1 alpha-2 codes."`
	Region    *string  `json:"region" nullable:"true" doc:"Region name on regional plans, otherwise null." example:"Europe"`
}

// PlanData is the data allowance.
type PlanData struct {
	Unlimited  bool   `json:"unlimited"`
	TotalBytes *int64 `json:"total_bytes" nullable:"true" doc:"null when unlimited."`
}

// Price is the plan's price; per day on per-day plans.
type Price struct {
	Amount   Amount `json:"amount"`
	Currency string `json:"currency" enum:"USD,EUR,GBP"`
}

// Pagination describes one page of a list.
type Pagination struct {
	Page    int  `json:"page" doc:"This page's number, from 1."`
	Limit   int  `json:"limit" doc:"Items per page asked for."`
	Total   int  `json:"total" doc:"Items in the whole list, on every page."`
	HasMore bool `json:"has_more" doc:"Whether a later page holds more items."`
}

// Envelope nests every successful payload under "data", so fields can be
// added beside it later (as pagination is for lists) without breaking
// clients.
type Envelope[T any] struct {
	Data T `json:"data"`
}

// ListEnvelope is Envelope for a page of a list, with where the page sits.
type ListEnvelope[T any] struct {
	Data       []T        `json:"data"`
	Pagination Pagination `json:"pagination"`
}

// PageParams are the paging query parameters of every list. Their bounds
// and defaults are the services' (proto/limits), set by pagingBounds: a
// struct tag cannot name a constant.
type PageParams struct {
	Page  int `query:"page"`
	Limit int `query:"limit"`
}

// orDefaults is p with the defaults of what the request left out.
func (p PageParams) orDefaults() PageParams {
	if p.Page == 0 {
		p.Page = 1
	}
	if p.Limit == 0 {
		p.Limit = limits.DefaultPageLimit
	}
	return p
}

func (p PageParams) pagination(total int) Pagination {
	p = p.orDefaults()
	return Pagination{Page: p.Page, Limit: p.Limit, Total: total, HasMore: p.Page*p.Limit < total}
}

// pagingBounds gives every operation's page and limit parameters the
// bounds, defaults and descriptions of proto/limits, for the document and
// for huma's and StrictQuery's checks alike.
func pagingBounds(_ *huma.OpenAPI, op *huma.Operation) {
	for _, p := range op.Parameters {
		if p.In != "query" || p.Schema == nil {
			continue
		}
		switch p.Name {
		case "page":
			bound(p, limits.MaxPage, 1, fmt.Sprintf("1-based page number, 1 to %d.", limits.MaxPage))
		case "limit":
			bound(p, limits.MaxPageLimit, limits.DefaultPageLimit, fmt.Sprintf("Items per page, 1 to %d.", limits.MaxPageLimit))
		}
	}
}

func bound(p *huma.Param, maximum, def int, doc string) {
	lowest, highest := 1.0, float64(maximum)
	p.Schema.Minimum, p.Schema.Maximum, p.Schema.Default = &lowest, &highest, def
	p.Schema.Description, p.Description = doc, doc
	// huma words its checks when a schema is built; these bounds came later.
	p.Schema.PrecomputeMessages()
}

type listPlansInput struct {
	StrictQuery
	PageParams
	// The pattern catches a malformed code here, alongside any other bad
	// parameter; whether a well-formed code names a country is the
	// catalogue's to say.
	Country string `query:"country" pattern:"^[A-Za-z]{2}$" doc:"ISO 3166-1 alpha-2 code: only plans that cover this country." example:"JP"`
	Type    string `query:"type" enum:"fixed,per_day" doc:"Only plans of this type."`
	// The eSIM is read in the key's scope: another's is not_found.
	TopUpFor string `query:"topup_for" doc:"eSIM id (UUID): only the plans that may top it up, of its plan's type and covering every country its plan covers."`
}

// Resolve adds to StrictQuery's findings, which it would otherwise hide, a
// malformed country code, worded as the catalogue words one that names no
// country. huma checks the pattern too, but its finding quotes the
// regular expression; this one, a queryFault, stands in its place.
func (in *listPlansInput) Resolve(ctx huma.Context) []error {
	errs := in.StrictQuery.Resolve(ctx)
	if in.Country == "" || isTwoLetters(in.Country) || slices.ContainsFunc(errs, isAbout("query.country")) {
		return errs
	}
	return append(errs, queryFault{&huma.ErrorDetail{Location: "query.country", Message: "want an ISO 3166-1 alpha-2 country code, such as JP"}})
}

// isAbout tells a queryFault about the parameter at location.
func isAbout(location string) func(error) bool {
	return func(err error) bool {
		q, ok := err.(queryFault)
		return ok && q.Location == location
	}
}

func isTwoLetters(s string) bool {
	isLetter := func(c byte) bool { return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' }
	return len(s) == 2 && isLetter(s[0]) && isLetter(s[1])
}

type listPlansOutput struct {
	Body ListEnvelope[Plan]
}

type getPlanInput struct {
	StrictQuery
	ID string `path:"id" doc:"Plan id (UUID) from GET /plans."`
}

type getPlanOutput struct {
	Body Envelope[Plan]
}

var readErrors = []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusInternalServerError}

func (a *handlers) registerPlans(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID: "list-plans",
		Method:      http.MethodGet,
		Path:        "/plans",
		Summary:     "List plans",
		Description: "Active plans priced in the account's currency, newest first. With `topup_for`, only those that may top up that eSIM (POST /v1/esims/{id}/topups); another account's or environment's eSIM, or an unknown one, is not_found.",
		Tags:        []string{"Plans"},
		Security:    bearerAuth,
		Errors:      append([]int{http.StatusNotFound}, readErrors...),
	}, a.listPlans)

	huma.Register(api, huma.Operation{
		OperationID: "get-plan",
		Method:      http.MethodGet,
		Path:        "/plans/{id}",
		Summary:     "Get a plan",
		Description: "A retired or unknown plan, or a malformed id, is not_found.",
		Tags:        []string{"Plans"},
		Security:    bearerAuth,
		Errors:      append([]int{http.StatusNotFound}, readErrors...),
	}, a.getPlan)
}

func (a *handlers) listPlans(ctx context.Context, in *listPlansInput) (*listPlansOutput, error) {
	// The catalogue owns the list of country codes and names a bad one as
	// an invalid "country" argument.
	q := gateway.PlanQuery{
		Country:  strings.ToUpper(in.Country),
		Type:     gateway.PlanType(in.Type),
		Currency: principalFrom(ctx).Currency,
		Page:     in.orDefaults().Page,
		Limit:    in.orDefaults().Limit,
	}
	otherType := false
	if in.TopUpFor != "" {
		id, ok := canonicalID(in.TopUpFor)
		if !ok {
			return nil, fromDomain(ctx, gateway.Invalid("topup_for", "want an eSIM id (a UUID)"))
		}
		c, err := a.Orders.EsimCoverage(ctx, principalFrom(ctx), id)
		if errors.Is(err, gateway.ErrNotFound) {
			return nil, fromDomain(ctx, withMessage(err, fmt.Sprintf("No eSIM %q in this environment.", in.TopUpFor)))
		}
		if err != nil {
			return nil, a.problem(ctx, err)
		}
		// No plan of another type tops the eSIM up; the catalogue is still
		// asked, to judge the other filters as it always does.
		otherType = q.Type != "" && q.Type != c.Type
		q.Type, q.Covers = c.Type, c.Countries
	}
	plans, total, err := a.Catalogue.ListPlans(ctx, q)
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	if otherType {
		plans, total = nil, 0
	}
	out := &listPlansOutput{Body: ListEnvelope[Plan]{Data: make([]Plan, len(plans)), Pagination: in.pagination(total)}}
	for i, plan := range plans {
		out.Body.Data[i] = toPlan(plan)
	}
	return out, nil
}

func (a *handlers) getPlan(ctx context.Context, in *getPlanInput) (*getPlanOutput, error) {
	plan, err := a.findPlan(ctx, in.ID)
	if errors.Is(err, gateway.ErrNotFound) {
		return nil, fromDomain(ctx, withMessage(err, fmt.Sprintf("No plan %q. It may have been retired; GET /v1/plans lists the plans on sale.", in.ID)))
	}
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	return &getPlanOutput{Body: Envelope[Plan]{Data: toPlan(plan)}}, nil
}

// findPlan treats a malformed id like an unknown one: it can name no plan.
// Only the canonical 36-character form is an id; uuid.Parse also takes
// braces, a urn:uuid: prefix and no hyphens, and a resource has one URL.
func (a *handlers) findPlan(ctx context.Context, rawID string) (gateway.Plan, error) {
	id, ok := canonicalID(rawID)
	if !ok {
		return gateway.Plan{}, gateway.ErrNotFound
	}
	return a.Catalogue.GetPlan(ctx, id, principalFrom(ctx).Currency)
}

// canonicalID is raw as an id in lower case, when it is the canonical
// 36-character form of a UUID: uuid.Parse also takes braces, a urn:uuid:
// prefix and no hyphens, and a resource has one URL.
func canonicalID(raw string) (string, bool) {
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != len(id.String()) {
		return "", false
	}
	return id.String(), true
}

func toPlan(p gateway.Plan) Plan {
	out := Plan{
		ID:       p.ID,
		Name:     p.Name,
		Type:     string(p.Type),
		Coverage: Coverage{Scope: p.Scope, Countries: p.Countries},
		Data:     PlanData{Unlimited: p.Unlimited},
		Price:    Price{Amount: Amount(p.PriceMinor), Currency: p.Currency},
		Status:   p.Status,
	}
	if out.Coverage.Countries == nil {
		out.Coverage.Countries = []string{}
	}
	if p.Region != "" {
		out.Coverage.Region = &p.Region
	}
	if !p.Unlimited {
		out.Data.TotalBytes = &p.TotalBytes
	}
	if p.Type != gateway.PerDay {
		out.ValidityDays = &p.ValidityDays
	}
	return out
}
