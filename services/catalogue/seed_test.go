package catalogue

import (
	"context"
	"maps"
	"slices"
	"testing"
)

func TestSeedPlansAreValidAndBroad(t *testing.T) {
	plans := SeedPlans()
	if len(plans) < 150 {
		t.Fatalf("%d seed plans, want at least 150", len(plans))
	}
	ids := map[string]bool{}
	countries := map[string]bool{}
	regions := map[string]bool{}
	var global, perDay, fixed int
	for i, p := range plans {
		if err := p.Validate(); err != nil {
			t.Fatalf("seed plan %d (%s): %v", i, p.Name, err)
		}
		if ids[p.ID.String()] {
			t.Fatalf("seed plan %d (%s): duplicate id %s", i, p.Name, p.ID)
		}
		ids[p.ID.String()] = true
		if p.Status != "" {
			t.Fatalf("seed plan %s sets status %q: seeding would override operators", p.Name, p.Status)
		}
		if len(p.Prices) != len(Currencies) {
			t.Fatalf("seed plan %s is priced in %d currencies, want every account currency", p.Name, len(p.Prices))
		}
		if !slices.IsSorted(p.Countries) {
			t.Fatalf("seed plan %s: countries not sorted", p.Name)
		}
		switch p.Scope {
		case ScopeCountry:
			countries[p.Countries[0]] = true
		case ScopeRegion:
			regions[p.Region] = true
		case ScopeGlobal:
			global++
		}
		if p.Type == PlanTypePerDay {
			perDay++
		} else {
			fixed++
		}
	}
	if len(countries) < 60 {
		t.Errorf("%d countries sold on their own, want at least 60", len(countries))
	}
	for _, r := range []string{"Europe", "Asia", "Americas", "Africa", "Middle East", "Oceania"} {
		if !regions[r] {
			t.Errorf("no regional plan for %s", r)
		}
	}
	if global == 0 || perDay == 0 || fixed == 0 {
		t.Errorf("global %d, per-day %d, fixed %d: want each", global, perDay, fixed)
	}
	t.Logf("%d plans, %d countries, %d regions, %d global, %d per-day", len(plans), len(countries), len(regions), global, perDay)
}

// A global plan covers every destination, the dearest included, so it
// must cost more in every currency than any regional or country plan of
// the same data (or per-day): otherwise it is the cheapest way to buy that
// destination, and the seed prices it below its own wholesale cost.
func TestSeedGlobalPlansCostMoreThanAnyNarrowerPlan(t *testing.T) {
	plans := SeedPlans()
	for _, g := range plans {
		if g.Scope != ScopeGlobal {
			continue
		}
		for _, p := range plans {
			if p.Scope == ScopeGlobal || p.Type != g.Type || p.TotalBytes != g.TotalBytes {
				continue
			}
			for _, c := range Currencies {
				gp, _ := g.PriceIn(c)
				pp, _ := p.PriceIn(c)
				if gp <= pp {
					t.Errorf("%s costs %d %s, no more than %s at %d", g.Name, gp, c, p.Name, pp)
				}
			}
		}
	}
}

func TestSeedCoversJapan(t *testing.T) {
	var jp []Plan
	for _, p := range SeedPlans() {
		if p.Scope == ScopeCountry && p.Countries[0] == "JP" {
			jp = append(jp, p)
		}
	}
	if len(jp) < 4 || !slices.ContainsFunc(jp, func(p Plan) bool { return p.Type == PlanTypePerDay }) {
		t.Fatalf("Japan has %d plans and needs several, including per-day", len(jp))
	}
}

// Seed ids are promised to partners: a refactor of the seed must not move
// them. The expected value was computed once and written down.
func TestSeedIDsAreStable(t *testing.T) {
	if got, want := SeedPlanID("jp-1gb-7d").String(), seedJP1GB; got != want {
		t.Fatalf("SeedPlanID(jp-1gb-7d) = %s, want %s", got, want)
	}
	if SeedPlanID("jp-1gb-7d").Version() != 5 {
		t.Fatal("seed ids must be UUID v5")
	}
	var found bool
	for _, p := range SeedPlans() {
		found = found || p.ID.String() == seedJP1GB
	}
	if !found {
		t.Fatal("jp-1gb-7d is not in the seed")
	}
}

const seedJP1GB = "09b1b2ea-a1ca-5a15-9352-bba30099ac2e"

// Each price list is written USD, EUR, GBP: a mix-up would charge every
// EUR partner the GBP amount. One plan's prices are written down; across
// the seed, a dollar price is the highest and a pound price the lowest, as
// retail prices in these currencies are.
func TestSeedPricesPerCurrency(t *testing.T) {
	want := map[Currency]int64{USD: 550, EUR: 500, GBP: 450}
	var found bool
	for _, p := range SeedPlans() {
		amounts := map[Currency]int64{}
		for _, price := range p.Prices {
			amounts[price.Currency] = price.Amount
		}
		if p.ID == SeedPlanID("jp-1gb-7d") {
			found = true
			if !maps.Equal(amounts, want) {
				t.Errorf("%s: prices %v, want %v", p.Name, amounts, want)
			}
		}
		if !(amounts[USD] > amounts[EUR] && amounts[EUR] > amounts[GBP]) {
			t.Errorf("%s: USD %d, EUR %d, GBP %d; want USD > EUR > GBP", p.Name, amounts[USD], amounts[EUR], amounts[GBP])
		}
	}
	if !found {
		t.Fatal("jp-1gb-7d is not in the seed")
	}
}

func TestSeedIsIdempotent(t *testing.T) {
	svc, st, _ := newTestService()
	ctx := context.Background()
	first, err := svc.Seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Created != len(SeedPlans()) {
		t.Fatalf("first seed: %+v", first)
	}
	jp := SeedPlanID("jp-1gb-7d")
	if _, err := svc.RetirePlan(ctx, jp); err != nil {
		t.Fatal(err)
	}
	before := st.plans[jp]
	second, err := svc.Seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Unchanged != len(SeedPlans()) || len(st.plans) != len(SeedPlans()) {
		t.Fatalf("second seed: %+v, %d plans stored", second, len(st.plans))
	}
	if after := st.plans[jp]; after.Status != StatusRetired || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("re-seeding touched a retired plan: %+v", after)
	}
}
