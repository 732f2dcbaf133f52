// Package catalogue owns the plans partners can order: what they cover, how
// much data for how long, their price in each account currency, and whether
// they are still on sale.
//
// It knows nothing of transport or storage; the Twirp adapter and the
// Postgres store live in the twirpserver and postgres subpackages.
package catalogue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/esimplatform/esim/proto/limits"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

// PlanType says how a plan is sold.
type PlanType string

const (
	// PlanTypeFixed is a data allowance valid for a number of days.
	PlanTypeFixed PlanType = "fixed"
	// PlanTypePerDay is unlimited data priced per day ordered; the eSIM is
	// valid for the days ordered, so the plan itself has no validity.
	PlanTypePerDay PlanType = "per_day"
)

// Scope says how wide a plan's coverage is.
type Scope string

const (
	ScopeCountry Scope = "country"
	ScopeRegion  Scope = "region"
	ScopeGlobal  Scope = "global"
)

// Status says whether a plan is on sale.
type Status string

const (
	StatusActive Status = "active"
	// StatusRetired plans are no longer listed and are not_found when
	// ordered, but stay readable for orders that reference them.
	StatusRetired Status = "retired"
)

// Currency is an ISO 4217 code of a currency accounts can hold.
type Currency string

const (
	USD Currency = "USD"
	EUR Currency = "EUR"
	GBP Currency = "GBP"
)

// Currencies lists every account currency, in the order prices are kept.
var Currencies = []Currency{EUR, GBP, USD}

// Valid reports whether accounts can hold c.
func (c Currency) Valid() bool { return slices.Contains(Currencies, c) }

// Price is the retail price of a plan in one currency, in minor units
// (cents, pence): money is never a float.
type Price struct {
	Currency Currency
	Amount   int64
}

// Plan is one product of the catalogue.
type Plan struct {
	ID   uuid.UUID
	Name string
	Type PlanType
	// Scope, Countries and Region describe coverage. Countries are ISO
	// 3166-1 alpha-2 codes, sorted; Region is set only for regional plans.
	Scope     Scope
	Countries []string
	Region    string
	// Unlimited plans have TotalBytes 0.
	Unlimited  bool
	TotalBytes int64
	// ValidityDays is 0 on per-day plans.
	ValidityDays int
	// Prices holds exactly one price per account currency (Currencies),
	// sorted by currency; on per-day plans a price is per day.
	Prices []Price
	// Status is empty on plans given to UpsertPlans that leave it to the
	// catalogue: active when new, unchanged otherwise.
	Status    Status
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PriceIn returns the plan's price in c, in minor units.
func (p Plan) PriceIn(c Currency) (int64, bool) {
	for _, pr := range p.Prices {
		if pr.Currency == c {
			return pr.Amount, true
		}
	}
	return 0, false
}

// Limits of a plan's fields.
const (
	// MaxNameLength and MaxRegionLength count characters of the trimmed
	// text, as it is stored.
	MaxNameLength   = 120
	MaxRegionLength = 60
	MaxValidityDays = 365
	// MaxPriceMinor is 10,000.00 in a two-decimal currency, about a hundred
	// times the dearest plan of the seed (99.00). It keeps a typo (a price
	// in minor units entered twice, or MaxInt64) out of the catalogue, and
	// keeps order totals exact: price x 365 days x 50 eSIMs is below 2^35,
	// far from overflowing int64 and from the 2^53 beyond which JSON
	// clients reading numbers as doubles lose cents.
	MaxPriceMinor = 1_000_000
	// MaxTotalBytes is 1 TiB, some fifty times the largest plan of the
	// seed (20 GB): no travel eSIM sells more, and byte counts stay exact
	// as JSON numbers read as doubles.
	MaxTotalBytes  = 1 << 40
	MaxUpsertBatch = limits.MaxPlansPerUpsert
	// Paging, as every list of the platform pages (proto/limits).
	DefaultPageLimit = limits.DefaultPageLimit
	MaxPageLimit     = limits.MaxPageLimit
	MaxPage          = limits.MaxPage
)

// normalized returns p with the ordering the catalogue promises (countries
// and prices sorted) and surrounding blanks trimmed, so that equal plans
// compare equal however the caller ordered them. The slices are copies: the
// caller's plan is never modified.
func (p Plan) normalized() Plan {
	p.Name = strings.TrimSpace(p.Name)
	p.Region = strings.TrimSpace(p.Region)
	p.Countries = slices.Clone(p.Countries)
	slices.Sort(p.Countries)
	p.Prices = slices.Clone(p.Prices)
	slices.SortFunc(p.Prices, func(a, b Price) int { return cmp.Compare(a.Currency, b.Currency) })
	return p
}

// Validate checks every rule a plan must satisfy to be sold. The first
// broken rule is reported, naming its field. Name and region are checked as
// they are stored: trimmed.
func (p Plan) Validate() error {
	if p.ID == uuid.Nil {
		return invalid("id", "is required")
	}
	if err := validText("name", p.Name, MaxNameLength); err != nil {
		return err
	}
	if strings.TrimSpace(p.Name) == "" {
		return invalid("name", "is required")
	}

	switch p.Type {
	case PlanTypeFixed:
		if p.Unlimited {
			return invalid("unlimited", "must be false on a fixed plan")
		}
		if p.TotalBytes <= 0 || p.TotalBytes > MaxTotalBytes {
			return invalid("total_bytes", "must be between 1 and %d (1 TiB) on a fixed plan", MaxTotalBytes)
		}
		if p.ValidityDays <= 0 || p.ValidityDays > MaxValidityDays {
			return invalid("validity_days", "must be between 1 and %d on a fixed plan", MaxValidityDays)
		}
	case PlanTypePerDay:
		if !p.Unlimited {
			return invalid("unlimited", "must be true on a per_day plan")
		}
		if p.TotalBytes != 0 {
			return invalid("total_bytes", "must be 0 on a per_day plan")
		}
		if p.ValidityDays != 0 {
			return invalid("validity_days", "must be 0 on a per_day plan: validity is the days ordered")
		}
	default:
		return invalid("type", "must be fixed or per_day")
	}

	if err := p.validateCoverage(); err != nil {
		return err
	}
	if err := validatePrices(p.Prices); err != nil {
		return err
	}
	switch p.Status {
	case "", StatusActive, StatusRetired:
	default:
		return invalid("status", "must be active or retired")
	}
	return nil
}

// maxQuotedCountry is the longest invalid country echoed back: enough for
// a country's name typed instead of its code ("United Kingdom").
const maxQuotedCountry = 40

func (p Plan) validateCoverage() error {
	if err := validText("region", p.Region, MaxRegionLength); err != nil {
		return err
	}
	region := strings.TrimSpace(p.Region)
	seen := make(map[string]bool, len(p.Countries))
	for i, c := range p.Countries {
		if !ValidCountry(c) {
			// A long value is not quoted: the answer would carry it back
			// whole, in the message and again in the reason.
			if n := utf8.RuneCountInString(c); n > maxQuotedCountry {
				return invalid(fmt.Sprintf("countries[%d]", i), "a value of %d characters is not an upper-case ISO 3166-1 alpha-2 code", n)
			}
			return invalid(fmt.Sprintf("countries[%d]", i), "%q is not an upper-case ISO 3166-1 alpha-2 code", c)
		}
		if seen[c] {
			return invalid(fmt.Sprintf("countries[%d]", i), "%s is listed twice", c)
		}
		seen[c] = true
	}
	switch p.Scope {
	case ScopeCountry:
		if len(p.Countries) != 1 {
			return invalid("countries", "a country plan covers exactly one country")
		}
		if region != "" {
			return invalid("region", "must be empty on a country plan")
		}
	case ScopeRegion:
		if region == "" {
			return invalid("region", "is required on a regional plan")
		}
		if len(p.Countries) < 2 {
			return invalid("countries", "a regional plan covers at least two countries")
		}
	case ScopeGlobal:
		if len(p.Countries) == 0 {
			return invalid("countries", "a global plan lists the countries it covers")
		}
		if region != "" {
			return invalid("region", "must be empty on a global plan")
		}
	default:
		return invalid("scope", "must be country, region or global")
	}
	return nil
}

// validText checks a name-like field as it will be stored (trimmed): at
// most max characters of printable text that shows something, by the rules
// and in the words of input.TextReason, which the accounts service holds
// its names to as well. An empty value passes here; whether the field is
// required is the caller's rule.
func validText(field, s string, max int) error {
	if reason := input.TextReason(strings.TrimSpace(s), max); reason != "" {
		return invalid(field, "%s", reason)
	}
	return nil
}

// currencyList names the account currencies for messages ("EUR, GBP, USD").
func currencyList() string {
	names := make([]string, len(Currencies))
	for i, c := range Currencies {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

// validatePrices requires exactly one price in every account currency: a
// plan missing one would silently vanish for the partners holding it.
func validatePrices(prices []Price) error {
	if len(prices) == 0 {
		return invalid("prices", "a price in each account currency (%s) is required", currencyList())
	}
	seen := make(map[Currency]bool, len(prices))
	for i, pr := range prices {
		field := fmt.Sprintf("prices[%d]", i)
		if !pr.Currency.Valid() {
			return invalid(field+".currency", "must be one of %s", currencyList())
		}
		if seen[pr.Currency] {
			return invalid(field+".currency", "%s is priced twice", pr.Currency)
		}
		seen[pr.Currency] = true
		if pr.Amount <= 0 || pr.Amount > MaxPriceMinor {
			return invalid(field+".amount", "must be between 1 and %d (minor units)", MaxPriceMinor)
		}
	}
	for _, c := range Currencies {
		if !seen[c] {
			return invalid("prices", "no price in %s: every plan is priced in every account currency (%s)", c, currencyList())
		}
	}
	return nil
}

// sameContent reports whether two normalised plans sell the same product at
// the same prices with the same status; timestamps are not content.
func sameContent(a, b Plan) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Type == b.Type &&
		a.Scope == b.Scope && slices.Equal(a.Countries, b.Countries) && a.Region == b.Region &&
		a.Unlimited == b.Unlimited && a.TotalBytes == b.TotalBytes && a.ValidityDays == b.ValidityDays &&
		slices.Equal(a.Prices, b.Prices) && a.Status == b.Status
}

// ListFilter selects active plans. Zero values mean "any" for the filters
// and the defaults (page 1, 20 per page) for pagination.
type ListFilter struct {
	// Country is an ISO 3166-1 alpha-2 code; plans covering it match.
	Country string
	// Covers keeps only plans covering every one of these codes: the plans
	// that may top up an eSIM whose plan covers them.
	Covers []string
	Type   PlanType
	// Currency keeps only plans priced in it.
	Currency Currency
	Page     int
	Limit    int
}

// PlanPage is one page of a listing, with what callers need to paginate.
type PlanPage struct {
	Plans []Plan
	// Total counts every plan matching the filter, on all pages.
	Total int
	Page  int
	Limit int
}

// HasMore reports whether a later page holds more plans.
func (p PlanPage) HasMore() bool { return p.Page*p.Limit < p.Total }

// ListQuery is a validated ListFilter as the store runs it: active plans
// only, newest first, ties broken by id so pages never overlap or skip.
type ListQuery struct {
	// Countries are the codes a plan must cover, every one of them (the
	// country filter and Covers together), upper case, sorted, each once.
	Countries []string
	Type      PlanType
	Currency  Currency
	Limit     int
	Offset    int
}

// UpsertResult counts what an upsert did to each plan it was given.
type UpsertResult struct {
	Created   int
	Updated   int
	Unchanged int
}

// Total is the number of plans the upsert was given.
func (r UpsertResult) Total() int { return r.Created + r.Updated + r.Unchanged }

// MergeFunc decides what to store for an incoming plan given the stored
// version (nil when the id is new): the plan to write and whether it differs
// from what is stored. Plans it reports unchanged are not written. An error
// (a *ValidationError when the incoming plan may not replace the stored
// one) aborts the whole upsert.
type MergeFunc func(stored *Plan, incoming Plan) (write Plan, changed bool, err error)

// Store keeps plans. Implementations return ErrNotFound for unknown ids.
type Store interface {
	// ListActivePlans returns one page of active plans matching q and the
	// number of matching plans on all pages, as of one snapshot.
	ListActivePlans(ctx context.Context, q ListQuery) (plans []Plan, total int, err error)
	// GetPlan returns the plan whatever its status.
	GetPlan(ctx context.Context, id uuid.UUID) (Plan, error)
	// GetPlans returns the stored plans among ids, whatever their status,
	// in any order; unknown ids are left out.
	GetPlans(ctx context.Context, ids []uuid.UUID) ([]Plan, error)
	// UpsertPlans runs merge for every plan against its stored version and
	// writes the changed ones, all in one transaction: either every plan is
	// stored or none is, and an error from merge is returned as it is, with
	// nothing written. Upserts run one at a time, and the stored versions
	// are locked while merge runs, so neither another upsert nor a
	// retirement can change a plan between merge reading it and the write.
	UpsertPlans(ctx context.Context, plans []Plan, merge MergeFunc) (UpsertResult, error)
	// RetirePlan marks the plan retired at the given time and returns it;
	// retiring a retired plan returns it unchanged.
	RetirePlan(ctx context.Context, id uuid.UUID, at time.Time) (Plan, error)
}

// Service is the catalogue's use cases.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService returns the catalogue over store. now is the clock (time.Now
// when nil); tests pass a fixed one.
func NewService(store Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now}
}

// ListPlans returns one page of active plans, newest first.
func (s *Service) ListPlans(ctx context.Context, f ListFilter) (PlanPage, error) {
	rules := input.Pages{DefaultLimit: DefaultPageLimit, MaxLimit: MaxPageLimit, MaxPage: MaxPage}
	page, field, reason := rules.Check(f.Page, f.Limit)
	if reason != "" {
		return PlanPage{}, invalid(field, "%s", reason)
	}
	q := ListQuery{
		Type:     f.Type,
		Currency: Currency(upperASCII(strings.TrimSpace(string(f.Currency)))),
		Limit:    page.Limit,
		Offset:   page.Offset(),
	}
	// Filters come from partners' query strings: accept "jp" for "JP".
	if c := filterCountry(f.Country); c != "" {
		if !ValidCountry(c) {
			// A partner reads this reason as the gateway's own, so it is
			// worded as the gateway words a malformed code.
			return PlanPage{}, invalid("country", "%s", countryReason)
		}
		q.Countries = append(q.Countries, c)
	}
	if len(f.Covers) > len(isoCountries) {
		return PlanPage{}, invalid("covers", "must hold at most %d codes, got %d", len(isoCountries), len(f.Covers))
	}
	for i, c := range f.Covers {
		c = filterCountry(c)
		if !ValidCountry(c) {
			return PlanPage{}, invalid(fmt.Sprintf("covers[%d]", i), "%s", countryReason)
		}
		q.Countries = append(q.Countries, c)
	}
	slices.Sort(q.Countries)
	q.Countries = slices.Compact(q.Countries)
	switch q.Type {
	case "", PlanTypeFixed, PlanTypePerDay:
	default:
		return PlanPage{}, invalid("type", "must be fixed or per_day")
	}
	if q.Currency != "" && !q.Currency.Valid() {
		return PlanPage{}, invalid("currency", "must be one of %s", currencyList())
	}
	plans, total, err := s.store.ListActivePlans(ctx, q)
	if err != nil {
		return PlanPage{}, fmt.Errorf("list plans: %w", err)
	}
	return PlanPage{Plans: plans, Total: total, Page: page.Number, Limit: page.Limit}, nil
}

const countryReason = "want an ISO 3166-1 alpha-2 country code, such as JP"

func filterCountry(s string) string { return upperASCII(strings.TrimSpace(s)) }

// upperASCII upper-cases a to z only. strings.ToUpper also folds the
// dotless i and the long s onto I and S, so "ıt" and "uſ" would pass as IT
// and US, and "uſd" as USD: no code is spelt that way.
func upperASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

// GetPlan returns an active plan, or a retired one too when includeRetired
// is set (orders placed before retirement still need to show it).
func (s *Service) GetPlan(ctx context.Context, id uuid.UUID, includeRetired bool) (Plan, error) {
	p, err := s.store.GetPlan(ctx, id)
	if err != nil {
		return Plan{}, err
	}
	if p.Status != StatusActive && !includeRetired {
		return Plan{}, ErrNotFound
	}
	return p, nil
}

// MaxPlansPerGet bounds one GetPlans call: one query, one answer of a
// bounded size. Callers that batch lookups read the same bound.
const MaxPlansPerGet = limits.MaxPlansPerGet

// GetPlans is GetPlan for many ids at once: it returns the plans GetPlan
// would return, in any order, and leaves out the ids GetPlan would answer
// ErrNotFound for. Repeated ids are answered once.
func (s *Service) GetPlans(ctx context.Context, ids []uuid.UUID, includeRetired bool) ([]Plan, error) {
	if len(ids) > MaxPlansPerGet {
		return nil, invalid("ids", "must hold at most %d ids, got %d", MaxPlansPerGet, len(ids))
	}
	if len(ids) == 0 {
		return []Plan{}, nil
	}
	plans, err := s.store.GetPlans(ctx, ids)
	if err != nil {
		return nil, err
	}
	if !includeRetired {
		plans = slices.DeleteFunc(plans, func(p Plan) bool { return p.Status != StatusActive })
	}
	return plans, nil
}

// UpsertPlans creates or replaces plans by id, all or none. A plan whose
// Status is empty keeps its stored status (active when new), so replaying
// a catalogue never re-activates a plan an operator retired. Creation time
// is kept on replace, and a plan given unchanged is not touched at all.
//
// An id stays the same product: replacing may change the name, prices,
// data, validity and a regional or global plan's countries, but not the
// type, the scope or a country plan's country (see productChange).
func (s *Service) UpsertPlans(ctx context.Context, plans []Plan) (UpsertResult, error) {
	if len(plans) == 0 {
		return UpsertResult{}, invalid("plans", "at least one plan is required")
	}
	if len(plans) > MaxUpsertBatch {
		return UpsertResult{}, invalid("plans", "at most %d plans per call", MaxUpsertBatch)
	}
	batch := make([]Plan, len(plans))
	seen := make(map[uuid.UUID]int, len(plans))
	for i, p := range plans {
		field := fmt.Sprintf("plans[%d]", i)
		// Validate before normalising so that indexes in field names point
		// into the caller's lists, not the sorted copies.
		if err := p.Validate(); err != nil {
			return UpsertResult{}, InField(field, err)
		}
		p = p.normalized()
		if j, dup := seen[p.ID]; dup {
			return UpsertResult{}, invalid(field+".id", "repeats plans[%d].id", j)
		}
		seen[p.ID] = i
		batch[i] = p
	}
	now := input.Now(s.now)
	res, err := s.store.UpsertPlans(ctx, batch, func(stored *Plan, in Plan) (Plan, bool, error) {
		w, changed, err := merge(stored, in, now)
		if err != nil {
			return Plan{}, false, InField(fmt.Sprintf("plans[%d]", seen[in.ID]), err)
		}
		return w, changed, nil
	})
	var ve *ValidationError
	if errors.As(err, &ve) {
		return UpsertResult{}, ve
	}
	if err != nil {
		return UpsertResult{}, fmt.Errorf("upsert plans: %w", err)
	}
	return res, nil
}

func merge(stored *Plan, in Plan, now time.Time) (Plan, bool, error) {
	if stored == nil {
		if in.Status == "" {
			in.Status = StatusActive
		}
		in.CreatedAt, in.UpdatedAt = now, now
		return in, true, nil
	}
	if err := productChange(*stored, in); err != nil {
		return Plan{}, false, err
	}
	if in.Status == "" {
		in.Status = stored.Status
	}
	in.CreatedAt, in.UpdatedAt = stored.CreatedAt, stored.UpdatedAt
	if sameContent(stored.normalized(), in) {
		return *stored, false, nil
	}
	in.UpdatedAt = now
	return in, true, nil
}

// productChange refuses a replacement that would make a stored plan id sell
// another product: partners keep plan ids, and orders reference them, so a
// "Japan 5 GB" id must not start selling unlimited days in France. Coverage
// updates of regional and global plans (a network added or dropped) and
// commercial changes (name, prices, data, validity) are allowed; retired
// plans are held to the same rule.
func productChange(stored, in Plan) error {
	const instead = "retire it and create a new id"
	if in.Type != stored.Type {
		return invalid("type", "cannot change type of an existing plan (%s to %s): %s", stored.Type, in.Type, instead)
	}
	if in.Scope != stored.Scope {
		return invalid("scope", "cannot change scope of an existing plan (%s to %s): %s", stored.Scope, in.Scope, instead)
	}
	if in.Scope == ScopeCountry && !slices.Equal(in.Countries, stored.Countries) {
		return invalid("countries", "cannot change the country of an existing country plan (%s to %s): %s",
			strings.Join(stored.Countries, ","), strings.Join(in.Countries, ","), instead)
	}
	return nil
}

// RetirePlan takes a plan off sale. It is idempotent: retiring a retired
// plan returns it as it is.
func (s *Service) RetirePlan(ctx context.Context, id uuid.UUID) (Plan, error) {
	return s.store.RetirePlan(ctx, id, input.Now(s.now))
}

// Seed upserts the bundled catalogue (see seed.go). Seed plans carry no
// status, so plans an operator retired stay retired, and their ids are
// stable, so seeding at every start never duplicates a plan.
func (s *Service) Seed(ctx context.Context) (UpsertResult, error) {
	return s.UpsertPlans(ctx, SeedPlans())
}
