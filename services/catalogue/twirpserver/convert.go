package twirpserver

import (
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/services/catalogue"
)

var (
	planTypes = map[cataloguev1.PlanType]catalogue.PlanType{
		cataloguev1.PlanType_PLAN_TYPE_FIXED:   catalogue.PlanTypeFixed,
		cataloguev1.PlanType_PLAN_TYPE_PER_DAY: catalogue.PlanTypePerDay,
	}
	scopes = map[cataloguev1.CoverageScope]catalogue.Scope{
		cataloguev1.CoverageScope_COVERAGE_SCOPE_COUNTRY: catalogue.ScopeCountry,
		cataloguev1.CoverageScope_COVERAGE_SCOPE_REGION:  catalogue.ScopeRegion,
		cataloguev1.CoverageScope_COVERAGE_SCOPE_GLOBAL:  catalogue.ScopeGlobal,
	}
	statuses = map[cataloguev1.PlanStatus]catalogue.Status{
		cataloguev1.PlanStatus_PLAN_STATUS_ACTIVE:  catalogue.StatusActive,
		cataloguev1.PlanStatus_PLAN_STATUS_RETIRED: catalogue.StatusRetired,
	}
)

func invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

var (
	planTypesPB = invert(planTypes)
	scopesPB    = invert(scopes)
	statusesPB  = invert(statuses)
)

// planFromProto converts an incoming plan. Unspecified or unknown type and
// scope values become the empty domain value, which validation rejects. An
// unspecified status is the empty status, "leave as stored"; an unknown one
// is refused here, since it would otherwise read as that. Timestamps are
// the catalogue's to set and are ignored.
func planFromProto(p *cataloguev1.Plan) (catalogue.Plan, error) {
	id, err := uuid.Parse(p.GetId())
	if err != nil {
		return catalogue.Plan{}, &catalogue.ValidationError{Field: "id", Reason: "must be a UUID"}
	}
	status, known := statuses[p.GetStatus()]
	if !known && p.GetStatus() != cataloguev1.PlanStatus_PLAN_STATUS_UNSPECIFIED {
		return catalogue.Plan{}, &catalogue.ValidationError{Field: "status", Reason: "must be active, retired or unspecified (keep the stored status)"}
	}
	prices := make([]catalogue.Price, len(p.GetPrices()))
	for i, m := range p.GetPrices() {
		prices[i] = catalogue.Price{Currency: catalogue.Currency(m.GetCurrency()), Amount: m.GetAmountMinor()}
	}
	return catalogue.Plan{
		ID:           id,
		Name:         p.GetName(),
		Type:         planTypes[p.GetType()],
		Scope:        scopes[p.GetScope()],
		Countries:    p.GetCountries(),
		Region:       p.GetRegion(),
		Unlimited:    p.GetUnlimited(),
		TotalBytes:   p.GetTotalBytes(),
		ValidityDays: int(p.GetValidityDays()),
		Prices:       prices,
		Status:       status,
	}, nil
}

func planToProto(p catalogue.Plan) *cataloguev1.Plan {
	prices := make([]*cataloguev1.Money, len(p.Prices))
	for i, pr := range p.Prices {
		prices[i] = &cataloguev1.Money{AmountMinor: pr.Amount, Currency: string(pr.Currency)}
	}
	return &cataloguev1.Plan{
		Id:           p.ID.String(),
		Name:         p.Name,
		Type:         planTypesPB[p.Type],
		Scope:        scopesPB[p.Scope],
		Countries:    p.Countries,
		Region:       p.Region,
		Unlimited:    p.Unlimited,
		TotalBytes:   p.TotalBytes,
		ValidityDays: int32(p.ValidityDays),
		Prices:       prices,
		Status:       statusesPB[p.Status],
		CreatedAt:    timestamp(p.CreatedAt),
		UpdatedAt:    timestamp(p.UpdatedAt),
	}
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
