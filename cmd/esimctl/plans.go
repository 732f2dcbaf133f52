package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"strings"

	"github.com/spf13/cobra"

	"github.com/esimplatform/esim/libs/money"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
)

// planView is a plan in --json output, shaped like the public API's plan
// but with every price, since operators see all currencies at once.
type planView struct {
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	Type     string       `json:"type"`
	Coverage coverageView `json:"coverage"`
	Data     dataView     `json:"data"`
	// null for per-day plans: the eSIM is valid for the days ordered.
	ValidityDays *int32      `json:"validity_days"`
	Prices       []priceView `json:"prices"`
	Status       string      `json:"status"`
	CreatedAt    *string     `json:"created_at"`
	UpdatedAt    *string     `json:"updated_at"`
}

type coverageView struct {
	Scope     string   `json:"scope"`
	Countries []string `json:"countries"`
	// null unless the scope is a region, as the public API has it.
	Region *string `json:"region"`
}

type dataView struct {
	Unlimited bool `json:"unlimited"`
	// null when unlimited.
	TotalBytes *int64 `json:"total_bytes"`
}

// priceView carries the amount both as the API shows it (a JSON number with
// two decimals, written from integers, never through a float) and in minor
// units for exact arithmetic in scripts.
type priceView struct {
	Amount      json.Number `json:"amount"`
	AmountMinor int64       `json:"amount_minor"`
	Currency    string      `json:"currency"`
	// per_day plans are priced per day ordered.
	Per string `json:"per"`
}

func viewPlan(p *cataloguev1.Plan) planView {
	v := planView{
		ID: p.GetId(), Name: p.GetName(), Type: p.GetType().ShortName(),
		Coverage:  coverageView{Scope: p.GetScope().ShortName(), Countries: p.GetCountries(), Region: orNull(p.GetRegion())},
		Data:      dataView{Unlimited: p.GetUnlimited()},
		Status:    p.GetStatus().ShortName(),
		CreatedAt: timestamp(p.GetCreatedAt()), UpdatedAt: timestamp(p.GetUpdatedAt()),
		Prices: make([]priceView, 0, len(p.GetPrices())),
	}
	if v.Coverage.Countries == nil {
		v.Coverage.Countries = []string{}
	}
	if !p.GetUnlimited() {
		b := p.GetTotalBytes()
		v.Data.TotalBytes = &b
	}
	per := "esim"
	if p.GetType() == cataloguev1.PlanType_PLAN_TYPE_PER_DAY {
		per = "day"
	} else {
		d := p.GetValidityDays()
		v.ValidityDays = &d
	}
	for _, m := range p.GetPrices() {
		v.Prices = append(v.Prices, priceView{
			Amount: json.Number(money.Decimal(m.GetAmountMinor())), AmountMinor: m.GetAmountMinor(), Currency: m.GetCurrency(), Per: per,
		})
	}
	return v
}

func coverageText(p *cataloguev1.Plan) string {
	switch p.GetScope() {
	case cataloguev1.CoverageScope_COVERAGE_SCOPE_COUNTRY:
		return strings.Join(p.GetCountries(), ",")
	case cataloguev1.CoverageScope_COVERAGE_SCOPE_REGION:
		return fmt.Sprintf("%s (%d countries)", p.GetRegion(), len(p.GetCountries()))
	case cataloguev1.CoverageScope_COVERAGE_SCOPE_GLOBAL:
		return fmt.Sprintf("global (%d countries)", len(p.GetCountries()))
	}
	return "-"
}

func dataText(p *cataloguev1.Plan) string {
	if p.GetUnlimited() {
		return "unlimited"
	}
	return dataSize(p.GetTotalBytes())
}

func validityText(p *cataloguev1.Plan) string {
	if p.GetType() == cataloguev1.PlanType_PLAN_TYPE_PER_DAY {
		return "days ordered"
	}
	return fmt.Sprintf("%d days", p.GetValidityDays())
}

func pricesText(p *cataloguev1.Plan) string {
	suffix := ""
	if p.GetType() == cataloguev1.PlanType_PLAN_TYPE_PER_DAY {
		suffix = "/day"
	}
	parts := make([]string, 0, len(p.GetPrices()))
	for _, m := range p.GetPrices() {
		parts = append(parts, priceText(m.GetAmountMinor(), m.GetCurrency())+suffix)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func (c *cli) plansCommand() *cobra.Command {
	return group("plans", "Browse, import and retire catalogue plans", "catalogue",
		c.plansListCommand(), c.plansGetCommand(), c.plansImportCommand(), c.plansRetireCommand())
}

func (c *cli) plansListCommand() *cobra.Command {
	var country, planType string
	var page, limit int32
	cmd := &cobra.Command{
		Use:     "list [--country CC] [--type fixed|per_day] [--limit N] [--page N]",
		Short:   "List active plans, newest first",
		Example: "  esimctl plans list --country JP --type per_day\n  esimctl plans list --json --limit 100 | jq -r '.data[].id'",
		Args:    exactArgs(),
	}
	cmd.Flags().StringVar(&country, "country", "", "only plans covering this ISO 3166-1 alpha-2 country (JP, FR, ...)")
	cmd.Flags().StringVar(&planType, "type", "", "only plans of this type: fixed or per_day")
	addPaging(cmd, &page, &limit, limits.DefaultPageLimit)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		req := &cataloguev1.ListPlansRequest{Page: page, Limit: limit}
		// An empty filter is refused, not dropped: `--country "$CC"` with CC
		// unset would otherwise list every plan as if they were CC's.
		if country != "" || cmd.Flags().Changed("country") {
			cc := strings.ToUpper(strings.TrimSpace(country))
			if len(cc) != 2 || cc[0] < 'A' || cc[0] > 'Z' || cc[1] < 'A' || cc[1] > 'Z' {
				return usagef("invalid --country %q: want an ISO 3166-1 alpha-2 code such as JP", country)
			}
			req.Country = cc
		}
		if planType != "" || cmd.Flags().Changed("type") {
			t, ok := cataloguev1.PlanTypeByShortName(strings.ReplaceAll(planType, "-", "_"))
			if !ok {
				return usagef("invalid --type %q: want fixed or per_day", planType)
			}
			req.Type = t
		}
		if err := checkPaging(page, limit); err != nil {
			return err
		}
		resp, err := c.catalogue().ListPlans(ctx, req)
		if err != nil {
			return c.callFailed("list plans", "catalogue", err)
		}
		if c.json {
			views := make([]planView, 0, len(resp.GetPlans()))
			for _, p := range resp.GetPlans() {
				views = append(views, viewPlan(p))
			}
			return c.printJSON(views, newPagination(page, limit, resp.GetTotal()))
		}
		rows := make([][]any, 0, len(resp.GetPlans()))
		for _, p := range resp.GetPlans() {
			rows = append(rows, []any{p.GetId(), p.GetName(), p.GetType().ShortName(), coverageText(p), dataText(p), validityText(p), pricesText(p), textTime(p.GetCreatedAt())})
		}
		return c.printList(page, limit, resp.GetTotal(), "plans", []any{"ID", "NAME", "TYPE", "COVERAGE", "DATA", "VALIDITY", "PRICE", "CREATED"}, rows)
	})
	return cmd
}

func (c *cli) plansGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get --plan ID",
		Short:   "Show one plan, retired or not",
		Example: "  esimctl plans get --plan 0193...\n  esimctl plans get 0193... --json > plan.json",
	}
	plan := addIDFlag(cmd, "plan", "PLAN_ID", "the plan's")
	cmd.Args = idArgs(plan)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		id, err := plan.id(cmd, args)
		if err != nil {
			return err
		}
		// Operators look up retired plans too (a partner's old order).
		p, err := c.catalogue().GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id, IncludeRetired: true})
		if err != nil {
			return c.callFailed("get plan "+id, "catalogue", err)
		}
		if c.json {
			return c.printJSON(viewPlan(p), nil)
		}
		tw := table(c.stdout)
		row(tw, "id:", p.GetId())
		row(tw, "name:", p.GetName())
		row(tw, "type:", p.GetType().ShortName())
		row(tw, "status:", p.GetStatus().ShortName())
		row(tw, "coverage:", coverageText(p))
		if p.GetScope() != cataloguev1.CoverageScope_COVERAGE_SCOPE_COUNTRY {
			row(tw, "countries:", strings.Join(p.GetCountries(), " "))
		}
		row(tw, "data:", dataText(p))
		row(tw, "validity:", validityText(p))
		row(tw, "prices:", pricesText(p))
		row(tw, "created:", textTime(p.GetCreatedAt()))
		row(tw, "updated:", textTime(p.GetUpdatedAt()))
		return tw.Flush()
	})
	return cmd
}

func (c *cli) plansRetireCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retire --plan ID",
		Short: "Retire a plan: it leaves the lists and is not_found when ordered",
		Long: `Retire a plan. It disappears from GET /plans and ordering it answers
not_found; orders already placed and their eSIMs are unaffected.`,
		Example: "  esimctl plans retire --plan 0193...",
	}
	plan := addIDFlag(cmd, "plan", "PLAN_ID", "the plan's")
	cmd.Args = idArgs(plan)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		id, err := plan.id(cmd, args)
		if err != nil {
			return err
		}
		p, err := c.catalogue().RetirePlan(ctx, &cataloguev1.RetirePlanRequest{Id: id})
		if err != nil {
			return c.callFailed("retire plan "+id, "catalogue", err)
		}
		if c.json {
			return c.printJSON(viewPlan(p), nil)
		}
		fmt.Fprintf(c.stdout, "retired plan %s (%s)\n", p.GetId(), p.GetName())
		return nil
	})
	return cmd
}
