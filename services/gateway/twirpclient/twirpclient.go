// Package twirpclient adapts the accounts, catalogue, ordering and wallet
// Twirp services to the gateway's interfaces. It is the one place Twirp error codes become
// gateway errors.
package twirpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/esimplatform/esim/proto/limits"

	"github.com/twitchtv/twirp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/libs/coalesce"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/services/gateway"
)

// translate maps a Twirp error from a service to the gateway's vocabulary.
// Anything not listed is the platform's fault and stays an internal error.
func translate(service string, err error) error {
	var terr twirp.Error
	if !errors.As(err, &terr) {
		return fmt.Errorf("%s: %w", service, err)
	}
	if terr.Meta("http_error_from_intermediary") != "" {
		// Not the service's answer but a proxy's, mesh's or load
		// balancer's, whose 401 or 404 Twirp maps onto the same codes: a
		// fault of ours, never a verdict on the partner's key or request.
		// Taken at face value, a 401 would be cached as a rejection.
		return fmt.Errorf("%s: %s from an intermediary: %w", service, terr.Code(), err)
	}
	switch terr.Code() {
	case twirp.Unauthenticated:
		return gateway.ErrUnauthorized
	case twirp.NotFound:
		return gateway.ErrNotFound
	case twirp.ResourceExhausted:
		// Ordering's cap of an account's orders in flight.
		return fmt.Errorf("%s: %s: %w", service, terr.Msg(), gateway.ErrRateLimited)
	case twirp.FailedPrecondition:
		if terr.Meta("reason") == "insufficient_funds" {
			return gateway.ErrInsufficientFunds
		}
		return fmt.Errorf("%s: %s: %w", service, terr.Code(), err)
	case twirp.InvalidArgument:
		field, reason := terr.Meta("argument"), terr.Meta("reason")
		if field == "" {
			field = "request"
		}
		if reason == "" {
			reason = terr.Msg()
		}
		return gateway.Invalid(field, reason)
	default:
		return fmt.Errorf("%s: %s: %w", service, terr.Code(), err)
	}
}

// Accounts authenticates keys with the accounts service.
type Accounts struct {
	client accountsv1.Accounts
}

// NewAccounts returns a client of the accounts service at baseURL.
func NewAccounts(baseURL string, hc *http.Client) *Accounts {
	return &Accounts{client: accountsv1.NewAccountsProtobufClient(baseURL, hc)}
}

// Authenticate implements gateway.Accounts.
func (a *Accounts) Authenticate(ctx context.Context, secret string) (gateway.Principal, error) {
	res, err := a.client.Authenticate(ctx, &accountsv1.AuthenticateRequest{Secret: secret})
	if err != nil {
		return gateway.Principal{}, translate("accounts", err)
	}
	env := gateway.Environment(res.GetEnvironment().ShortName())
	if env != gateway.Sandbox && env != gateway.Live {
		return gateway.Principal{}, fmt.Errorf("accounts: key %s has no environment", res.GetKeyId())
	}
	return gateway.Principal{
		AccountID:          res.GetAccountId(),
		Environment:        env,
		KeyID:              res.GetKeyId(),
		Currency:           res.GetCurrency(),
		RateLimitPerMinute: int(res.GetRateLimitPerMinute()),
	}, nil
}

// Catalogue reads plans from the catalogue service.
type Catalogue struct {
	client  cataloguev1.Catalogue
	plans   *coalesce.Batcher[planLookup, *cataloguev1.Plan]
	timeout time.Duration
}

// planLookup is one caller's lookup. Its caller's span is linked from the
// span of the call that serves it (see getPlans).
type planLookup struct {
	id     string
	caller trace.SpanContext
}

// CoalescedGetPlansSpan names the span of a GetPlans call shared by
// several lookups.
const CoalescedGetPlansSpan = "catalogue.GetPlans coalesced"

// PlanCallsInFlight is how many GetPlans calls one gateway keeps
// outstanding. Lookups beyond them queue and go out together in the next
// call; fewer slots make bigger batches, more make shorter waits. One,
// since every call saved is a wake-up of the catalogue and of Postgres
// saved, which at moderate load costs more than the wait.
const PlanCallsInFlight = 1

// NewCatalogue returns a client of the catalogue service at baseURL.
//
// Plan lookups, the hot path of the public API, are coalesced: a lookup
// made while the catalogue is idle goes out alone; lookups made while
// earlier ones are in flight share one GetPlans call, one HTTP exchange
// and one query. Every lookup still reaches the catalogue and its
// database, so a retired plan is not_found from the next call on.
//
// timeout bounds a plan lookup from the moment it is made, its wait for a
// call included: hc's timeout bounds each call, but with the catalogue
// hung a queued lookup would otherwise wait for a call to time out before
// its own went out, and then for that one too.
//
// observe, when not nil, hears of every GetPlans call the lookups share.
func NewCatalogue(baseURL string, hc *http.Client, timeout time.Duration, observe coalesce.Observer) *Catalogue {
	c := &Catalogue{client: cataloguev1.NewCatalogueProtobufClient(baseURL, hc), timeout: timeout}
	c.plans = coalesce.New(c.getPlans, coalesce.Options{MaxBatch: limits.MaxPlansPerGet, MaxInFlight: PlanCallsInFlight, Observe: observe})
	return c
}

// getPlans answers each lookup with its plan, or nil when the catalogue
// left it out (unknown or retired). A shared call has a span of its own
// (batchSpan).
func (c *Catalogue) getPlans(ctx context.Context, batch []planLookup) ([]*cataloguev1.Plan, error) {
	ids := make([]string, len(batch))
	callers := make([]trace.SpanContext, len(batch))
	for i, l := range batch {
		ids[i], callers[i] = l.id, l.caller
	}
	ctx, end := batchSpan(ctx, CoalescedGetPlansSpan, callers, "esim.plan_lookups")
	defer end()
	res, err := c.client.GetPlans(ctx, &cataloguev1.GetPlansRequest{Ids: ids})
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*cataloguev1.Plan, len(res.GetPlans()))
	for _, p := range res.GetPlans() {
		byID[p.GetId()] = p
	}
	out := make([]*cataloguev1.Plan, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out, nil
}

// batchSpan starts the span of a call that callers share, when there are
// several and tracing is on; end ends it. A shared call runs in the first
// caller's trace, so the others' traces would show no call at all: the
// span links every caller's span, OpenTelemetry's way of drawing a batch,
// and the call's own spans are its children. count names the attribute
// that says how many callers it served.
func batchSpan(ctx context.Context, name string, callers []trace.SpanContext, count string) (context.Context, func()) {
	first := trace.SpanFromContext(ctx)
	if len(callers) < 2 || !first.SpanContext().IsValid() {
		return ctx, func() {}
	}
	links := make([]trace.Link, 0, len(callers))
	for _, c := range callers {
		if c.IsValid() {
			links = append(links, trace.Link{SpanContext: c})
		}
	}
	ctx, span := first.TracerProvider().Tracer("github.com/esimplatform/esim/services/gateway/twirpclient").Start(ctx,
		name, trace.WithLinks(links...), trace.WithAttributes(attribute.Int(count, len(callers))))
	return ctx, func() { span.End() }
}

// ListPlans implements gateway.Catalogue.
func (c *Catalogue) ListPlans(ctx context.Context, q gateway.PlanQuery) ([]gateway.Plan, int, error) {
	res, err := c.client.ListPlans(ctx, &cataloguev1.ListPlansRequest{
		Country:  q.Country,
		Covers:   q.Covers,
		Type:     planType(q.Type),
		Page:     int32(q.Page),
		Limit:    int32(q.Limit),
		Currency: q.Currency,
	})
	if err != nil {
		return nil, 0, translate("catalogue", err)
	}
	plans := make([]gateway.Plan, 0, len(res.GetPlans()))
	for _, p := range res.GetPlans() {
		if err := knownEnums(p); err != nil {
			return nil, 0, err
		}
		plan, ok := fromProto(p, q.Currency)
		if !ok {
			return nil, 0, fmt.Errorf("catalogue: plan %s listed without a %s price", p.GetId(), q.Currency)
		}
		plans = append(plans, plan)
	}
	return plans, int(res.GetTotal()), nil
}

// GetPlan implements gateway.Catalogue, through the coalesced GetPlans.
func (c *Catalogue) GetPlan(ctx context.Context, id, currency string) (gateway.Plan, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	p, err := c.plans.Do(ctx, planLookup{id: id, caller: trace.SpanContextFromContext(ctx)})
	if err != nil {
		return gateway.Plan{}, translate("catalogue", err)
	}
	if p == nil {
		return gateway.Plan{}, gateway.ErrNotFound
	}
	if err := knownEnums(p); err != nil {
		return gateway.Plan{}, err
	}
	plan, ok := fromProto(p, currency)
	if !ok {
		// Not sold in the caller's currency: to this caller it does not exist.
		return gateway.Plan{}, gateway.ErrNotFound
	}
	return plan, nil
}

// knownEnums refuses a plan whose type, scope or status this gateway's
// contract does not name, as a newer catalogue could send during a rolling
// upgrade: passed on, it would reach partners as a value the API does not
// define (protobuf keeps an unknown enum value as its number, "7"). An
// error, as a plan without the caller's price in a list is: loud in the
// logs, and no partner decodes what the API never promised.
func knownEnums(p *cataloguev1.Plan) error {
	if !p.GetType().Known() || !p.GetScope().Known() || !p.GetStatus().Known() {
		return fmt.Errorf("catalogue: plan %s has type %s, scope %s and status %s; this gateway knows only fixed or per_day, country, region or global, active or retired",
			p.GetId(), p.GetType(), p.GetScope(), p.GetStatus())
	}
	return nil
}

// planType is the filter for t; the zero value, no filter, for "".
func planType(t gateway.PlanType) cataloguev1.PlanType {
	pt, _ := cataloguev1.PlanTypeByShortName(string(t))
	return pt
}

// fromProto picks the price in currency; ok is false when there is none.
func fromProto(p *cataloguev1.Plan, currency string) (gateway.Plan, bool) {
	for _, price := range p.GetPrices() {
		if price.GetCurrency() != currency {
			continue
		}
		return gateway.Plan{
			ID:           p.GetId(),
			Name:         p.GetName(),
			Type:         gateway.PlanType(p.GetType().ShortName()),
			Scope:        p.GetScope().ShortName(),
			Countries:    p.GetCountries(),
			Region:       p.GetRegion(),
			Unlimited:    p.GetUnlimited(),
			TotalBytes:   p.GetTotalBytes(),
			ValidityDays: int(p.GetValidityDays()),
			PriceMinor:   price.GetAmountMinor(),
			Currency:     currency,
			Status:       p.GetStatus().ShortName(),
		}, true
	}
	return gateway.Plan{}, false
}
