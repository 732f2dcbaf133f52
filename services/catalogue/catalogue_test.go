package catalogue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// memStore is the in-memory Store the domain tests run against; the real
// one is tested against Postgres in the postgres package.
type memStore struct {
	mu        sync.Mutex
	plans     map[uuid.UUID]Plan
	lastQuery ListQuery
}

func newMemStore() *memStore { return &memStore{plans: map[uuid.UUID]Plan{}} }

func (m *memStore) ListActivePlans(_ context.Context, q ListQuery) ([]Plan, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastQuery = q
	var out []Plan
	for _, p := range m.plans {
		if p.Status == StatusActive {
			out = append(out, p)
		}
	}
	return out, len(out), nil
}

func (m *memStore) GetPlan(_ context.Context, id uuid.UUID) (Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.plans[id]
	if !ok {
		return Plan{}, ErrNotFound
	}
	return p, nil
}

func (m *memStore) GetPlans(_ context.Context, ids []uuid.UUID) ([]Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Plan
	for id, p := range m.plans {
		if slices.Contains(ids, id) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (m *memStore) UpsertPlans(_ context.Context, plans []Plan, merge MergeFunc) (UpsertResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var res UpsertResult
	var writes []Plan
	for _, in := range plans {
		var stored *Plan
		if p, ok := m.plans[in.ID]; ok {
			stored = &p
		}
		w, changed, err := merge(stored, in)
		if err != nil {
			return UpsertResult{}, err // like a rolled-back transaction: nothing written
		}
		switch {
		case !changed:
			res.Unchanged++
		case stored == nil:
			res.Created++
		default:
			res.Updated++
		}
		if changed {
			writes = append(writes, w)
		}
	}
	for _, w := range writes {
		m.plans[w.ID] = w
	}
	return res, nil
}

func (m *memStore) RetirePlan(_ context.Context, id uuid.UUID, at time.Time) (Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.plans[id]
	if !ok {
		return Plan{}, ErrNotFound
	}
	if p.Status != StatusRetired {
		p.Status, p.UpdatedAt = StatusRetired, at
		m.plans[id] = p
	}
	return p, nil
}

// fakeClock advances by a minute every time it is read, so each write gets
// a distinct, predictable time.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time {
	c.t = c.t.Add(time.Minute)
	return c.t
}

func newTestService() (*Service, *memStore, *fakeClock) {
	st := newMemStore()
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return NewService(st, clk.now), st, clk
}

func fixedPlan() Plan {
	return Plan{
		ID:           uuid.MustParse("0190d3f0-0000-7000-8000-000000000001"),
		Name:         "Japan 5 GB, 30 days",
		Type:         PlanTypeFixed,
		Scope:        ScopeCountry,
		Countries:    []string{"JP"},
		TotalBytes:   5 * gigabyte,
		ValidityDays: 30,
		Prices:       []Price{{USD, 1650}, {EUR, 1500}, {GBP, 1300}},
	}
}

func perDayPlan() Plan {
	return Plan{
		ID:        uuid.MustParse("0190d3f0-0000-7000-8000-000000000002"),
		Name:      "Europe Unlimited, per day",
		Type:      PlanTypePerDay,
		Scope:     ScopeRegion,
		Region:    "Europe",
		Countries: []string{"FR", "DE", "IT"},
		Unlimited: true,
		Prices:    []Price{{EUR, 600}, {USD, 650}, {GBP, 520}},
	}
}

func wantValidation(t *testing.T, err error, field string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want *ValidationError on %q", err, field)
	}
	if ve.Field != field {
		t.Fatalf("validation error on %q (%s), want field %q", ve.Field, ve.Reason, field)
	}
}

func TestValidate(t *testing.T) {
	if err := fixedPlan().Validate(); err != nil {
		t.Fatalf("valid fixed plan: %v", err)
	}
	if err := perDayPlan().Validate(); err != nil {
		t.Fatalf("valid per-day plan: %v", err)
	}
	long := make([]rune, MaxNameLength+1)
	for i := range long {
		long[i] = 'é'
	}
	cases := []struct {
		name   string
		base   func() Plan
		change func(*Plan)
		field  string
	}{
		{"no id", fixedPlan, func(p *Plan) { p.ID = uuid.Nil }, "id"},
		{"no name", fixedPlan, func(p *Plan) { p.Name = "  " }, "name"},
		{"name too long", fixedPlan, func(p *Plan) { p.Name = string(long) }, "name"},
		{"unknown type", fixedPlan, func(p *Plan) { p.Type = "monthly" }, "type"},
		{"fixed unlimited", fixedPlan, func(p *Plan) { p.Unlimited = true }, "unlimited"},
		{"fixed without bytes", fixedPlan, func(p *Plan) { p.TotalBytes = 0 }, "total_bytes"},
		{"fixed without validity", fixedPlan, func(p *Plan) { p.ValidityDays = 0 }, "validity_days"},
		{"fixed validity too long", fixedPlan, func(p *Plan) { p.ValidityDays = MaxValidityDays + 1 }, "validity_days"},
		{"per-day limited", perDayPlan, func(p *Plan) { p.Unlimited = false }, "unlimited"},
		{"per-day with bytes", perDayPlan, func(p *Plan) { p.TotalBytes = gigabyte }, "total_bytes"},
		{"per-day with validity", perDayPlan, func(p *Plan) { p.ValidityDays = 7 }, "validity_days"},
		{"country scope two countries", fixedPlan, func(p *Plan) { p.Countries = []string{"JP", "KR"} }, "countries"},
		{"country scope no country", fixedPlan, func(p *Plan) { p.Countries = nil }, "countries"},
		{"country scope with region", fixedPlan, func(p *Plan) { p.Region = "Asia" }, "region"},
		{"lower-case country", fixedPlan, func(p *Plan) { p.Countries = []string{"jp"} }, "countries[0]"},
		{"unassigned country", fixedPlan, func(p *Plan) { p.Countries = []string{"XK"} }, "countries[0]"},
		{"alpha-3 country", fixedPlan, func(p *Plan) { p.Countries = []string{"JPN"} }, "countries[0]"},
		{"region without name", perDayPlan, func(p *Plan) { p.Region = "" }, "region"},
		{"region one country", perDayPlan, func(p *Plan) { p.Countries = []string{"FR"} }, "countries"},
		{"region duplicate country", perDayPlan, func(p *Plan) { p.Countries = []string{"FR", "DE", "FR"} }, "countries[2]"},
		{"global without countries", perDayPlan, func(p *Plan) { p.Scope, p.Region, p.Countries = ScopeGlobal, "", nil }, "countries"},
		{"global with region", perDayPlan, func(p *Plan) { p.Scope = ScopeGlobal }, "region"},
		{"unknown scope", fixedPlan, func(p *Plan) { p.Scope = "continent" }, "scope"},
		{"no prices", fixedPlan, func(p *Plan) { p.Prices = nil }, "prices"},
		{"no GBP price", fixedPlan, func(p *Plan) { p.Prices = p.Prices[:2] }, "prices"},
		{"EUR price only", perDayPlan, func(p *Plan) { p.Prices = p.Prices[:1] }, "prices"},
		{"price over the maximum", fixedPlan, func(p *Plan) { p.Prices[1].Amount = 1_000_001 }, "prices[1].amount"},
		{"price of MaxInt64", fixedPlan, func(p *Plan) { p.Prices[0].Amount = math.MaxInt64 }, "prices[0].amount"},
		{"bytes over the maximum", fixedPlan, func(p *Plan) { p.TotalBytes = 1<<40 + 1 }, "total_bytes"},
		{"bytes of MaxInt64", fixedPlan, func(p *Plan) { p.TotalBytes = math.MaxInt64 }, "total_bytes"},
		{"NUL in name", fixedPlan, func(p *Plan) { p.Name = "Japan\x00 5 GB" }, "name"},
		{"escape in name", fixedPlan, func(p *Plan) { p.Name = "Japan \x1b[31m5 GB" }, "name"},
		{"newline in name", fixedPlan, func(p *Plan) { p.Name = "Japan\n5 GB" }, "name"},
		{"C1 control in name", fixedPlan, func(p *Plan) { p.Name = "Japan\u0085 5 GB" }, "name"},
		{"right-to-left override in name", fixedPlan, func(p *Plan) { p.Name = "Japan \u202e5 GB" }, "name"},
		{"left-to-right embedding in name", fixedPlan, func(p *Plan) { p.Name = "Japan \u202a5 GB" }, "name"},
		{"first-strong isolate in name", fixedPlan, func(p *Plan) { p.Name = "Japan \u20685 GB" }, "name"},
		{"pop directional isolate in name", fixedPlan, func(p *Plan) { p.Name = "Japan \u20695 GB" }, "name"},
		{"NUL in region", perDayPlan, func(p *Plan) { p.Region = "Eu\x00rope" }, "region"},
		{"tab in region", perDayPlan, func(p *Plan) { p.Region = "Eu\trope" }, "region"},
		{"right-to-left override in region", perDayPlan, func(p *Plan) { p.Region = "\u202eeporuE" }, "region"},
		{"left-to-right isolate in region", perDayPlan, func(p *Plan) { p.Region = "\u2066Europe" }, "region"},
		{"zero-width space as name", fixedPlan, func(p *Plan) { p.Name = "\u200b" }, "name"},
		{"punctuation as name", fixedPlan, func(p *Plan) { p.Name = "--" }, "name"},
		{"format marks as name", fixedPlan, func(p *Plan) { p.Name = " \u200e\u2060 " }, "name"},
		{"zero-width space as region", perDayPlan, func(p *Plan) { p.Region = "\u200b" }, "region"},
		{"punctuation as region", perDayPlan, func(p *Plan) { p.Region = "- * -" }, "region"},
		{"zero price", fixedPlan, func(p *Plan) { p.Prices[1].Amount = 0 }, "prices[1].amount"},
		{"negative price", fixedPlan, func(p *Plan) { p.Prices[0].Amount = -1 }, "prices[0].amount"},
		{"unsupported currency", fixedPlan, func(p *Plan) { p.Prices[2].Currency = "JPY" }, "prices[2].currency"},
		{"lower-case currency", fixedPlan, func(p *Plan) { p.Prices[2].Currency = "gbp" }, "prices[2].currency"},
		{"currency twice", fixedPlan, func(p *Plan) { p.Prices[2].Currency = USD }, "prices[2].currency"},
		{"unknown status", fixedPlan, func(p *Plan) { p.Status = "paused" }, "status"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.base()
			tc.change(&p)
			wantValidation(t, p.Validate(), tc.field)
		})
	}
}

// TestValidateTextReasons pins the reasons given for a name or region:
// input.TextReason's, which the accounts service gives for its names too,
// naming the offending character where one is at fault.
func TestValidateTextReasons(t *testing.T) {
	for _, tc := range []struct {
		name   string
		base   func() Plan
		change func(*Plan)
		field  string
		reason string
	}{
		{"zero-width space as name", fixedPlan, func(p *Plan) { p.Name = "\u200b" }, "name", "must contain at least one letter or digit"},
		{"punctuation as name", fixedPlan, func(p *Plan) { p.Name = " -- " }, "name", "must contain at least one letter or digit"},
		{"blank name", fixedPlan, func(p *Plan) { p.Name = " \t " }, "name", "is required"},
		{"zero-width space as region", perDayPlan, func(p *Plan) { p.Region = "\u200b" }, "region", "must contain at least one letter or digit"},
		{"control in name", fixedPlan, func(p *Plan) { p.Name = "Japan\x1b5 GB" }, "name", "must not contain control characters (found U+001B)"},
		{"override in region", perDayPlan, func(p *Plan) { p.Region = "Eu\u202erope" }, "region", "must not contain bidirectional override or isolate characters (found U+202E)"},
		{"paragraph separator in name", fixedPlan, func(p *Plan) { p.Name = "Japan\u20295 GB" }, "name", "must not contain line or paragraph separators (found U+2029)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.base()
			tc.change(&p)
			err := p.Validate()
			wantValidation(t, err, tc.field)
			var ve *ValidationError
			errors.As(err, &ve)
			if ve.Reason != tc.reason {
				t.Fatalf("reason %q, want %q", ve.Reason, tc.reason)
			}
		})
	}

	// Text with a letter or digit anywhere passes, in any script.
	for _, name := range []string{"5", "日本 5 GB", "Ελλάδα", "— 7 —", "Japan\u200b 5 GB"} {
		p := fixedPlan()
		p.Name = name
		if err := p.Validate(); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
	p := perDayPlan()
	p.Region = "Europe\u200d"
	if err := p.Validate(); err != nil {
		t.Errorf("region with a joiner: %v", err)
	}
}

func TestListPlansPagination(t *testing.T) {
	svc, st, _ := newTestService()
	ctx := context.Background()

	page, err := svc.ListPlans(ctx, ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if page.Page != 1 || page.Limit != DefaultPageLimit || st.lastQuery.Limit != 20 || st.lastQuery.Offset != 0 {
		t.Fatalf("defaults: page %d limit %d, store query %+v", page.Page, page.Limit, st.lastQuery)
	}

	if _, err := svc.ListPlans(ctx, ListFilter{Page: 3, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if st.lastQuery.Limit != 100 || st.lastQuery.Offset != 200 {
		t.Fatalf("page 3 of 100: store query %+v", st.lastQuery)
	}
	if _, err := svc.ListPlans(ctx, ListFilter{Page: MaxPage, Limit: 100}); err != nil || st.lastQuery.Offset != (MaxPage-1)*100 {
		t.Fatalf("last page: %v, store query %+v", err, st.lastQuery)
	}

	for _, tc := range []struct {
		f     ListFilter
		field string
	}{
		{ListFilter{Page: -1}, "page"},
		{ListFilter{Page: MaxPage + 1}, "page"},
		{ListFilter{Limit: -1}, "limit"},
		{ListFilter{Limit: MaxPageLimit + 1}, "limit"},
		{ListFilter{Country: "ZZ"}, "country"},
		{ListFilter{Country: "Japan"}, "country"},
		{ListFilter{Covers: []string{"JP", "ZZ"}}, "covers[1]"},
		{ListFilter{Covers: []string{"u\u017f"}}, "covers[0]"},
		{ListFilter{Covers: []string{""}}, "covers[0]"},
		{ListFilter{Covers: make([]string, 250)}, "covers"},
		{ListFilter{Type: "monthly"}, "type"},
		{ListFilter{Currency: "JPY"}, "currency"},
	} {
		_, err := svc.ListPlans(ctx, tc.f)
		wantValidation(t, err, tc.field)
	}
}

func TestListPlansNormalisesFilters(t *testing.T) {
	svc, st, _ := newTestService()
	if _, err := svc.ListPlans(context.Background(), ListFilter{Country: " jp", Currency: "eur", Type: PlanTypePerDay}); err != nil {
		t.Fatal(err)
	}
	want := ListQuery{Countries: []string{"JP"}, Currency: EUR, Type: PlanTypePerDay, Limit: 20}
	if !reflect.DeepEqual(st.lastQuery, want) {
		t.Fatalf("store query %+v, want %+v", st.lastQuery, want)
	}

	// The country filter and covers ask the same of a plan: the store gets
	// each code once, sorted.
	if _, err := svc.ListPlans(context.Background(), ListFilter{Country: "kr", Covers: []string{"JP", " kr", "FR", "jp"}}); err != nil {
		t.Fatal(err)
	}
	if got := st.lastQuery.Countries; !slices.Equal(got, []string{"FR", "JP", "KR"}) {
		t.Fatalf("store countries %q, want FR JP KR", got)
	}
	if _, err := svc.ListPlans(context.Background(), ListFilter{}); err != nil || st.lastQuery.Countries != nil {
		t.Fatalf("no country filter: %v, store countries %q", err, st.lastQuery.Countries)
	}
}

func TestPlanPageHasMore(t *testing.T) {
	for _, tc := range []struct {
		page, limit, total int
		want               bool
	}{{1, 20, 20, false}, {1, 20, 21, true}, {2, 20, 40, false}, {5, 20, 0, false}} {
		if got := (PlanPage{Page: tc.page, Limit: tc.limit, Total: tc.total}).HasMore(); got != tc.want {
			t.Errorf("page %d limit %d total %d: HasMore %v", tc.page, tc.limit, tc.total, got)
		}
	}
}

func TestUpsertCreatesNormalisedActivePlans(t *testing.T) {
	svc, st, _ := newTestService()
	ctx := context.Background()
	in := perDayPlan()
	in.Name = "  " + in.Name + " "
	res, err := svc.UpsertPlans(ctx, []Plan{fixedPlan(), in})
	if err != nil {
		t.Fatal(err)
	}
	if res != (UpsertResult{Created: 2}) {
		t.Fatalf("result %+v", res)
	}
	got := st.plans[in.ID]
	if got.Status != StatusActive || got.CreatedAt.IsZero() || !got.CreatedAt.Equal(got.UpdatedAt) {
		t.Fatalf("new plan status %q created %v updated %v", got.Status, got.CreatedAt, got.UpdatedAt)
	}
	if !slices.Equal(got.Countries, []string{"DE", "FR", "IT"}) || got.Name != "Europe Unlimited, per day" {
		t.Fatalf("not normalised: %q %v", got.Name, got.Countries)
	}
	if !slices.Equal(in.Countries, []string{"FR", "DE", "IT"}) {
		t.Fatalf("caller's plan was modified: %v", in.Countries)
	}
	fx := st.plans[fixedPlan().ID]
	if !slices.IsSortedFunc(fx.Prices, func(a, b Price) int { return cmp.Compare(a.Currency, b.Currency) }) {
		t.Fatalf("prices not sorted: %v", fx.Prices)
	}
	if amount, ok := fx.PriceIn(GBP); !ok || amount != 1300 {
		t.Fatalf("PriceIn(GBP) = %d, %v", amount, ok)
	}
}

func TestUpsertReplaceKeepsCreationAndStatus(t *testing.T) {
	svc, st, _ := newTestService()
	ctx := context.Background()
	p := fixedPlan()
	if _, err := svc.UpsertPlans(ctx, []Plan{p}); err != nil {
		t.Fatal(err)
	}
	created := st.plans[p.ID].CreatedAt
	if _, err := svc.RetirePlan(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	retiredAt := st.plans[p.ID].UpdatedAt

	// The same content again, status left to the catalogue: nothing moves.
	res, err := svc.UpsertPlans(ctx, []Plan{p})
	if err != nil {
		t.Fatal(err)
	}
	if res != (UpsertResult{Unchanged: 1}) || !st.plans[p.ID].UpdatedAt.Equal(retiredAt) || st.plans[p.ID].Status != StatusRetired {
		t.Fatalf("identical upsert: %+v, stored %+v", res, st.plans[p.ID])
	}
	// Prices in another order are the same prices.
	slices.Reverse(p.Prices)
	if res, _ := svc.UpsertPlans(ctx, []Plan{p}); res.Unchanged != 1 {
		t.Fatalf("reordered prices counted as a change: %+v", res)
	}

	// New content, status still left alone: updated, still retired.
	p.Prices[0].Amount++
	res, err = svc.UpsertPlans(ctx, []Plan{p})
	if err != nil {
		t.Fatal(err)
	}
	got := st.plans[p.ID]
	if res != (UpsertResult{Updated: 1}) || got.Status != StatusRetired || !got.CreatedAt.Equal(created) || !got.UpdatedAt.After(retiredAt) {
		t.Fatalf("changed upsert: %+v, stored %+v", res, got)
	}

	// An explicit status is the operator's decision and is applied.
	p.Status = StatusActive
	if _, err := svc.UpsertPlans(ctx, []Plan{p}); err != nil {
		t.Fatal(err)
	}
	if st.plans[p.ID].Status != StatusActive || !st.plans[p.ID].CreatedAt.Equal(created) {
		t.Fatalf("re-activation: %+v", st.plans[p.ID])
	}
}

func TestUpsertRejectsBadBatches(t *testing.T) {
	svc, st, _ := newTestService()
	ctx := context.Background()

	_, err := svc.UpsertPlans(ctx, nil)
	wantValidation(t, err, "plans")

	bad := perDayPlan()
	bad.Countries = []string{"FR", "EU"}
	_, err = svc.UpsertPlans(ctx, []Plan{fixedPlan(), bad})
	wantValidation(t, err, "plans[1].countries[1]")

	_, err = svc.UpsertPlans(ctx, []Plan{fixedPlan(), perDayPlan(), fixedPlan()})
	wantValidation(t, err, "plans[2].id")

	// One plan past the bound: an import that large is refused whole, not
	// written as one long transaction.
	tooMany := make([]Plan, MaxUpsertBatch+1)
	for i := range tooMany {
		tooMany[i] = fixedPlan()
		tooMany[i].ID = uuid.New()
	}
	_, err = svc.UpsertPlans(ctx, tooMany)
	wantValidation(t, err, "plans")

	if len(st.plans) != 0 {
		t.Fatalf("a rejected batch stored %d plans", len(st.plans))
	}
}

func TestGetAndRetire(t *testing.T) {
	svc, _, _ := newTestService()
	ctx := context.Background()
	p := fixedPlan()
	if _, err := svc.UpsertPlans(ctx, []Plan{p}); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.GetPlan(ctx, p.ID, false); err != nil || got.Status != StatusActive {
		t.Fatalf("GetPlan active: %+v, %v", got, err)
	}
	retired, err := svc.RetirePlan(ctx, p.ID)
	if err != nil || retired.Status != StatusRetired {
		t.Fatalf("RetirePlan: %+v, %v", retired, err)
	}
	again, err := svc.RetirePlan(ctx, p.ID)
	if err != nil || !again.UpdatedAt.Equal(retired.UpdatedAt) {
		t.Fatalf("retiring twice moved the plan: %+v, %v", again, err)
	}
	if _, err := svc.GetPlan(ctx, p.ID, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetPlan retired: %v, want ErrNotFound", err)
	}
	if got, err := svc.GetPlan(ctx, p.ID, true); err != nil || got.Status != StatusRetired {
		t.Fatalf("GetPlan retired with includeRetired: %+v, %v", got, err)
	}
	if _, err := svc.GetPlan(ctx, uuid.New(), true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetPlan unknown: %v", err)
	}
	if _, err := svc.RetirePlan(ctx, uuid.New()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RetirePlan unknown: %v", err)
	}
}

func TestGetPlansAnswersWhatGetPlanWould(t *testing.T) {
	svc, _, _ := newTestService()
	ctx := context.Background()
	active, retired := fixedPlan(), fixedPlan()
	retired.ID = uuid.New()
	if _, err := svc.UpsertPlans(ctx, []Plan{active, retired}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RetirePlan(ctx, retired.ID); err != nil {
		t.Fatal(err)
	}
	ids := []uuid.UUID{retired.ID, uuid.New(), active.ID}
	got, err := svc.GetPlans(ctx, ids, false)
	if err != nil || len(got) != 1 || got[0].ID != active.ID {
		t.Fatalf("GetPlans active only: %+v, %v; want the active plan alone", got, err)
	}
	got, err = svc.GetPlans(ctx, ids, true)
	if err != nil || len(got) != 2 {
		t.Fatalf("GetPlans including retired: %+v, %v; want both stored plans", got, err)
	}
	if got, err := svc.GetPlans(ctx, nil, false); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("GetPlans of no ids: %#v, %v; want an empty list", got, err)
	}
	tooMany := make([]uuid.UUID, MaxPlansPerGet+1)
	var ve *ValidationError
	if _, err := svc.GetPlans(ctx, tooMany, false); !errors.As(err, &ve) || ve.Field != "ids" {
		t.Fatalf("GetPlans of %d ids: %v; want a validation error on ids", len(tooMany), err)
	}
}

func TestServiceClockIsStorable(t *testing.T) {
	st := newMemStore()
	svc := NewService(st, func() time.Time {
		return time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	})
	if _, err := svc.UpsertPlans(context.Background(), []Plan{fixedPlan()}); err != nil {
		t.Fatal(err)
	}
	got := st.plans[fixedPlan().ID].CreatedAt
	if got.Location() != time.UTC || got.Nanosecond() != 123456000 {
		t.Fatalf("created_at %v: want UTC truncated to microseconds", got)
	}
}

// Every plan is priced in every account currency: the error names the
// currency that is missing, so an operator knows what to add.
func TestValidateNamesTheMissingCurrency(t *testing.T) {
	for _, missing := range []Currency{EUR, GBP, USD} {
		p := fixedPlan()
		p.Prices = slices.DeleteFunc(p.Prices, func(pr Price) bool { return pr.Currency == missing })
		err := p.Validate()
		wantValidation(t, err, "prices")
		if !strings.Contains(err.Error(), string(missing)) {
			t.Errorf("without %s: %v; want the reason to name %s", missing, err, missing)
		}
	}
}

// An unknown currency, priced or filtered on, is answered with the list of
// account currencies, the same list in every catalogue message that names
// them.
func TestUnknownCurrencyListsTheAccountCurrencies(t *testing.T) {
	const want = "must be one of EUR, GBP, USD"
	p := fixedPlan()
	p.Prices[2].Currency = "JPY"
	err := p.Validate()
	wantValidation(t, err, "prices[2].currency")
	if ve := err.(*ValidationError); ve.Reason != want {
		t.Errorf("priced in JPY: reason %q, want %q", ve.Reason, want)
	}

	svc, _, _ := newTestService()
	_, err = svc.ListPlans(context.Background(), ListFilter{Currency: "JPY"})
	wantValidation(t, err, "currency")
	if ve := err.(*ValidationError); ve.Reason != want {
		t.Errorf("filtered on JPY: reason %q, want %q", ve.Reason, want)
	}
}

// Lengths are counted on what is stored: the trimmed text.
func TestValidateCountsLengthAfterTrimming(t *testing.T) {
	name := strings.Repeat("é", 120)
	region := strings.Repeat("r", 60)
	p := perDayPlan()
	p.Name, p.Region = " "+name+"\t", "  "+region+" "
	if err := p.Validate(); err != nil {
		t.Fatalf("padded %d-character name and %d-character region: %v", 120, 60, err)
	}
	svc, st, _ := newTestService()
	if _, err := svc.UpsertPlans(context.Background(), []Plan{p}); err != nil {
		t.Fatal(err)
	}
	if got := st.plans[p.ID]; got.Name != name || got.Region != region {
		t.Fatalf("stored name %q region %q, want them trimmed", got.Name, got.Region)
	}
	p.Name = " " + name + "x"
	wantValidation(t, p.Validate(), "name")
	p.Name, p.Region = name, " "+region+"x"
	wantValidation(t, p.Validate(), "region")
}

// A plan id is a product partners keep ordering: an upsert may reprice,
// rename or resize it, and change a multi-country plan's coverage, but not
// turn it into another kind of product. A batch holding such a change
// writes nothing.
func TestUpsertRejectsChangingWhatAPlanIs(t *testing.T) {
	ctx := context.Background()
	fresh := func() Plan {
		p := fixedPlan()
		p.ID = uuid.MustParse("0190d3f0-0000-7000-8000-0000000000aa")
		return p
	}
	perDay := func(p *Plan) { p.Type, p.Unlimited, p.TotalBytes, p.ValidityDays = PlanTypePerDay, true, 0, 0 }
	fixed := func(p *Plan) { p.Type, p.Unlimited, p.TotalBytes, p.ValidityDays = PlanTypeFixed, false, gigabyte, 7 }
	for _, tc := range []struct {
		name    string
		base    func() Plan
		retired bool
		change  func(*Plan)
		field   string
	}{
		{"fixed to per_day", fixedPlan, false, perDay, "plans[1].type"},
		{"per_day to fixed", perDayPlan, false, fixed, "plans[1].type"},
		{"retired fixed to per_day", fixedPlan, true, perDay, "plans[1].type"},
		{"country to region", fixedPlan, false, func(p *Plan) { p.Scope, p.Region, p.Countries = ScopeRegion, "Asia", []string{"JP", "KR"} }, "plans[1].scope"},
		{"region to global", perDayPlan, false, func(p *Plan) { p.Scope, p.Region = ScopeGlobal, "" }, "plans[1].scope"},
		{"country JP to FR", fixedPlan, false, func(p *Plan) { p.Countries = []string{"FR"} }, "plans[1].countries"},
		{"retired country JP to FR", fixedPlan, true, func(p *Plan) { p.Countries = []string{"FR"} }, "plans[1].countries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, st, _ := newTestService()
			p := tc.base()
			if _, err := svc.UpsertPlans(ctx, []Plan{p}); err != nil {
				t.Fatal(err)
			}
			if tc.retired {
				if _, err := svc.RetirePlan(ctx, p.ID); err != nil {
					t.Fatal(err)
				}
			}
			before := st.plans[p.ID]
			tc.change(&p)
			if err := p.Validate(); err != nil {
				t.Fatalf("the changed plan must be valid on its own: %v", err)
			}
			_, err := svc.UpsertPlans(ctx, []Plan{fresh(), p})
			wantValidation(t, err, tc.field)
			if !strings.Contains(err.Error(), "retire it and create a new id") {
				t.Errorf("reason %q does not say what to do instead", err)
			}
			if got := st.plans[p.ID]; fmt.Sprint(got) != fmt.Sprint(before) {
				t.Fatalf("rejected upsert changed the plan:\nbefore %+v\nafter  %+v", before, got)
			}
			if _, stored := st.plans[fresh().ID]; stored || len(st.plans) != 1 {
				t.Fatalf("a rejected batch stored its valid plan: %d plans", len(st.plans))
			}
		})
	}
}

func TestUpsertAllowsCoverageAndCommercialChanges(t *testing.T) {
	svc, st, _ := newTestService()
	ctx := context.Background()
	country, region := fixedPlan(), perDayPlan()
	global := perDayPlan()
	global.ID, global.Scope, global.Region = uuid.MustParse("0190d3f0-0000-7000-8000-000000000003"), ScopeGlobal, ""
	if _, err := svc.UpsertPlans(ctx, []Plan{country, region, global}); err != nil {
		t.Fatal(err)
	}
	country.Name, country.TotalBytes, country.ValidityDays = "Japan 6 GB, 45 days", 6*gigabyte, 45
	country.Prices[0].Amount++
	country.Countries = []string{"JP"}
	region.Countries = append(region.Countries, "ES")
	region.Region = "Western Europe"
	global.Countries = []string{"US", "JP"}
	res, err := svc.UpsertPlans(ctx, []Plan{country, region, global})
	if err != nil {
		t.Fatal(err)
	}
	if res != (UpsertResult{Updated: 3}) {
		t.Fatalf("result %+v, want three updates", res)
	}
	if got := st.plans[region.ID]; !slices.Equal(got.Countries, []string{"DE", "ES", "FR", "IT"}) || got.Region != "Western Europe" {
		t.Fatalf("regional coverage update not stored: %+v", got)
	}
	if got := st.plans[global.ID]; !slices.Equal(got.Countries, []string{"JP", "US"}) {
		t.Fatalf("global coverage update not stored: %+v", got)
	}
}

func TestValidateAcceptsTheMaxima(t *testing.T) {
	p := fixedPlan()
	p.TotalBytes = MaxTotalBytes
	for i := range p.Prices {
		p.Prices[i].Amount = MaxPriceMinor
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("plan at the maxima: %v", err)
	}
	p.TotalBytes++
	wantValidation(t, p.Validate(), "total_bytes")
	p.TotalBytes--
	p.Prices[2].Amount++
	wantValidation(t, p.Validate(), "prices[2].amount")
}
