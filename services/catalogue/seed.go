package catalogue

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// The bundled catalogue: what a fresh platform sells, seeded at start when
// SEED_CATALOGUE is set. It is data compiled into the binary, so every
// replica seeds exactly the same plans.
//
// Plan ids are UUID v5 of a readable slug ("jp-5gb-30d") in seedNamespace:
// the same slug gives the same id on every start and every replica, which is
// what makes seeding idempotent and lets partners keep plan ids. Changing a
// slug therefore creates a new plan; retire the old one instead.
var seedNamespace = uuid.MustParse("8a4c2f1e-6b0d-5e3a-9c7f-2d1b0e4a6f58")

// SeedPlanID returns the stable id of the bundled plan with this slug.
func SeedPlanID(slug string) uuid.UUID {
	return uuid.NewSHA1(seedNamespace, []byte(slug))
}

const gigabyte = 1 << 30

// priceTier groups destinations by what data costs there wholesale; tier 0
// is the cheapest (EU roaming area, US), tier 3 remote or premium networks.
type priceTier int

// offer is one product line sold in several places at tier-dependent prices.
type offer struct {
	slug  string // suffix of the plan slug: "1gb-7d", "unlimited-day"
	gb    int64  // 0 for per-day unlimited plans
	days  int
	label string // suffix of the plan name
}

var (
	offer1GB  = offer{"1gb-7d", 1, 7, "1 GB, 7 days"}
	offer3GB  = offer{"3gb-15d", 3, 15, "3 GB, 15 days"}
	offer5GB  = offer{"5gb-30d", 5, 30, "5 GB, 30 days"}
	offer10GB = offer{"10gb-30d", 10, 30, "10 GB, 30 days"}
	offer20GB = offer{"20gb-30d", 20, 30, "20 GB, 30 days"}
	offerDay  = offer{"unlimited-day", 0, 0, "Unlimited, per day"}
)

// money is a retail price list: USD, EUR, GBP in minor units. Each currency
// is set in round retail steps of ten cents, not converted at a daily
// rate, so a partner's price does not move with the FX market.
type money [3]int64

func (m money) prices() []Price {
	return []Price{{USD, m[0]}, {EUR, m[1]}, {GBP, m[2]}}
}

// tierPrices[tier][offer slug] is the price of an offer in a country of that
// tier. A tier without an offer does not sell it (no 20 GB plans where data
// is expensive).
var tierPrices = [4]map[string]money{
	{
		"1gb-7d": {450, 420, 360}, "3gb-15d": {850, 790, 690}, "5gb-30d": {1250, 1150, 990},
		"10gb-30d": {1950, 1800, 1550}, "20gb-30d": {2950, 2750, 2350}, "unlimited-day": {550, 500, 450},
	},
	{
		"1gb-7d": {550, 500, 450}, "3gb-15d": {1100, 990, 890}, "5gb-30d": {1650, 1500, 1300},
		"10gb-30d": {2600, 2400, 2100}, "20gb-30d": {3900, 3600, 3100}, "unlimited-day": {650, 600, 520},
	},
	{
		"1gb-7d": {750, 690, 600}, "3gb-15d": {1650, 1500, 1300}, "5gb-30d": {2450, 2250, 1950},
		"10gb-30d": {3900, 3600, 3100}, "unlimited-day": {900, 830, 720},
	},
	{
		"1gb-7d": {1150, 1050, 920}, "3gb-15d": {2650, 2450, 2100}, "5gb-30d": {3950, 3650, 3150},
		"unlimited-day": {1400, 1290, 1120},
	},
}

// destination is a country sold on its own. perDay marks destinations with
// an unlimited per-day plan: the busiest tourist markets, where operators
// sell wholesale unlimited bundles.
type destination struct {
	code   string
	name   string
	tier   priceTier
	perDay bool
}

var destinations = []destination{
	// Tier 0: the EU roaming area, the UK and the US.
	{"AT", "Austria", 0, false}, {"BE", "Belgium", 0, false}, {"BG", "Bulgaria", 0, false},
	{"HR", "Croatia", 0, true}, {"CY", "Cyprus", 0, false}, {"CZ", "Czechia", 0, false},
	{"DK", "Denmark", 0, false}, {"EE", "Estonia", 0, false}, {"FI", "Finland", 0, false},
	{"FR", "France", 0, true}, {"DE", "Germany", 0, true}, {"GR", "Greece", 0, true},
	{"HU", "Hungary", 0, false}, {"IE", "Ireland", 0, false}, {"IT", "Italy", 0, true},
	{"LV", "Latvia", 0, false}, {"LT", "Lithuania", 0, false}, {"LU", "Luxembourg", 0, false},
	{"MT", "Malta", 0, false}, {"NL", "Netherlands", 0, true}, {"PL", "Poland", 0, false},
	{"PT", "Portugal", 0, true}, {"RO", "Romania", 0, false}, {"SK", "Slovakia", 0, false},
	{"SI", "Slovenia", 0, false}, {"ES", "Spain", 0, true}, {"SE", "Sweden", 0, false},
	{"GB", "United Kingdom", 0, true}, {"US", "United States", 0, true},
	// Tier 1: developed Asia-Pacific, non-EU Western Europe, North America.
	{"AU", "Australia", 1, true}, {"CA", "Canada", 1, true}, {"CN", "China", 1, true},
	{"HK", "Hong Kong", 1, true}, {"IS", "Iceland", 1, false}, {"ID", "Indonesia", 1, true},
	{"IL", "Israel", 1, false}, {"JP", "Japan", 1, true}, {"MY", "Malaysia", 1, false},
	{"MX", "Mexico", 1, true}, {"NZ", "New Zealand", 1, false}, {"NO", "Norway", 1, false},
	{"PH", "Philippines", 1, false}, {"SG", "Singapore", 1, true}, {"KR", "South Korea", 1, true},
	{"CH", "Switzerland", 1, true}, {"TW", "Taiwan", 1, false}, {"TH", "Thailand", 1, true},
	{"TR", "Türkiye", 1, true}, {"AE", "United Arab Emirates", 1, true}, {"VN", "Vietnam", 1, true},
	// Tier 2: Latin America, South Asia, the Gulf, North and South Africa.
	{"AL", "Albania", 2, false}, {"AR", "Argentina", 2, false}, {"BH", "Bahrain", 2, false},
	{"BA", "Bosnia and Herzegovina", 2, false}, {"BR", "Brazil", 2, true}, {"KH", "Cambodia", 2, false},
	{"CL", "Chile", 2, false}, {"CO", "Colombia", 2, false}, {"CR", "Costa Rica", 2, false},
	{"EC", "Ecuador", 2, false}, {"EG", "Egypt", 2, true}, {"IN", "India", 2, true},
	{"JO", "Jordan", 2, false}, {"KE", "Kenya", 2, false}, {"KW", "Kuwait", 2, false},
	{"ME", "Montenegro", 2, false}, {"MA", "Morocco", 2, true}, {"NP", "Nepal", 2, false},
	{"OM", "Oman", 2, false}, {"PE", "Peru", 2, false}, {"QA", "Qatar", 2, true},
	{"SA", "Saudi Arabia", 2, true}, {"RS", "Serbia", 2, false}, {"ZA", "South Africa", 2, true},
	{"LK", "Sri Lanka", 2, false}, {"TN", "Tunisia", 2, false}, {"UY", "Uruguay", 2, false},
	// Tier 3: remote or premium networks.
	{"BD", "Bangladesh", 3, false}, {"BO", "Bolivia", 3, false}, {"DO", "Dominican Republic", 3, false},
	{"FJ", "Fiji", 3, false}, {"GH", "Ghana", 3, false}, {"GT", "Guatemala", 3, false},
	{"JM", "Jamaica", 3, false}, {"KZ", "Kazakhstan", 3, false}, {"LA", "Laos", 3, false},
	{"MO", "Macao", 3, false}, {"MV", "Maldives", 3, true}, {"MN", "Mongolia", 3, false},
	{"NG", "Nigeria", 3, false}, {"PK", "Pakistan", 3, false}, {"PA", "Panama", 3, false},
	{"SN", "Senegal", 3, false}, {"TZ", "Tanzania", 3, false}, {"UZ", "Uzbekistan", 3, false},
}

// region is a multi-country bundle, priced at the tier of the members most
// of its travellers visit, never below its cheapest member's. A few dearer
// members ride along at that price, as in retail bundles: Asia (tier 2)
// covers Pakistan (tier 3), so for Pakistan alone the bundle undercuts the
// country's own plan. Re-tiering a bundle is a pricing decision, made in
// this table.
type region struct {
	slug      string
	name      string
	tier      priceTier
	countries []string
}

var regions = []region{
	{"europe", "Europe", 1, []string{
		"AL", "AT", "BA", "BE", "BG", "CH", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GB", "GR",
		"HR", "HU", "IE", "IS", "IT", "LT", "LU", "LV", "ME", "MT", "NL", "NO", "PL", "PT", "RO", "RS",
		"SE", "SI", "SK", "TR",
	}},
	{"european-union", "European Union", 0, []string{
		"AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GR", "HR", "HU", "IE", "IT",
		"LT", "LU", "LV", "MT", "NL", "PL", "PT", "RO", "SE", "SI", "SK",
	}},
	{"asia", "Asia", 2, []string{
		"BD", "CN", "HK", "ID", "IN", "JP", "KH", "KR", "LA", "LK", "MO", "MY", "NP", "PH", "PK", "SG",
		"TH", "TW", "VN",
	}},
	{"southeast-asia", "Southeast Asia", 1, []string{"ID", "KH", "LA", "MY", "PH", "SG", "TH", "VN"}},
	{"north-america", "North America", 1, []string{"CA", "MX", "US"}},
	{"americas", "Americas", 2, []string{
		"AR", "BO", "BR", "CA", "CL", "CO", "CR", "DO", "EC", "GT", "JM", "MX", "PA", "PE", "US", "UY",
	}},
	{"latin-america", "Latin America", 2, []string{
		"AR", "BO", "BR", "CL", "CO", "CR", "DO", "EC", "GT", "MX", "PA", "PE", "UY",
	}},
	{"middle-east", "Middle East", 2, []string{"AE", "BH", "EG", "IL", "JO", "KW", "OM", "QA", "SA", "TR"}},
	{"africa", "Africa", 3, []string{"EG", "GH", "KE", "MA", "NG", "SN", "TN", "TZ", "ZA"}},
	{"oceania", "Oceania", 2, []string{"AU", "FJ", "NZ"}},
}

var regionOffers = []offer{offer1GB, offer3GB, offer5GB, offer10GB, offerDay}

// Global plans cover every destination sold on its own; they cost more than
// any region or country plan of the same data because the dearest networks
// set the wholesale price (and a cheaper global plan would undercut every
// tier-3 destination and the Africa bundle).
var globalPrices = []struct {
	offer offer
	price money
}{
	{offer{"1gb-7d", 1, 7, "1 GB, 7 days"}, money{1250, 1150, 990}},
	{offer{"3gb-30d", 3, 30, "3 GB, 30 days"}, money{2950, 2750, 2350}},
	{offer{"5gb-30d", 5, 30, "5 GB, 30 days"}, money{4250, 3900, 3350}},
	{offer{"10gb-30d", 10, 30, "10 GB, 30 days"}, money{5900, 5450, 4700}},
	{offer{"20gb-60d", 20, 60, "20 GB, 60 days"}, money{9900, 9100, 7900}},
	{offerDay, money{1500, 1390, 1190}},
}

// SeedPlans returns the bundled catalogue. Plans carry no status and no
// timestamps: the catalogue decides those when it stores them.
func SeedPlans() []Plan {
	var plans []Plan
	for _, d := range destinations {
		offers := []offer{offer1GB, offer3GB, offer5GB, offer10GB, offer20GB}
		if d.perDay {
			offers = append(offers, offerDay)
		}
		for _, o := range offers {
			price, sold := tierPrices[d.tier][o.slug]
			if !sold {
				continue
			}
			plans = append(plans, seedPlan(strings.ToLower(d.code)+"-"+o.slug, d.name, o, ScopeCountry, "", []string{d.code}, price))
		}
	}
	for _, r := range regions {
		for _, o := range regionOffers {
			price, sold := tierPrices[r.tier][o.slug]
			if !sold {
				continue
			}
			plans = append(plans, seedPlan(r.slug+"-"+o.slug, r.name, o, ScopeRegion, r.name, r.countries, price))
		}
	}
	world := make([]string, 0, len(destinations))
	for _, d := range destinations {
		world = append(world, d.code)
	}
	for _, g := range globalPrices {
		plans = append(plans, seedPlan("global-"+g.offer.slug, "Global", g.offer, ScopeGlobal, "", world, g.price))
	}
	return plans
}

func seedPlan(slug, place string, o offer, scope Scope, regionName string, countries []string, price money) Plan {
	p := Plan{
		ID:        SeedPlanID(slug),
		Name:      fmt.Sprintf("%s %s", place, o.label),
		Scope:     scope,
		Countries: slices.Sorted(slices.Values(countries)),
		Region:    regionName,
		Prices:    price.prices(),
	}
	if o.gb == 0 {
		p.Type, p.Unlimited = PlanTypePerDay, true
	} else {
		p.Type, p.TotalBytes, p.ValidityDays = PlanTypeFixed, o.gb*gigabyte, o.days
	}
	return p.normalized()
}
