package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"strings"

	"github.com/spf13/cobra"

	"github.com/esimplatform/esim/libs/money"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
)

// orderView is an order in --json output: the public API's order with its
// account, and money as priceView has it: as the API shows it and in
// minor units.
type orderView struct {
	ID          string `json:"id"`
	AccountID   string `json:"account_id"`
	Environment string `json:"environment"`
	// pending, completed or failed.
	Status   string `json:"status"`
	PlanID   string `json:"plan_id"`
	Quantity int32  `json:"quantity"`
	// null on a fixed plan: only per-day plans are ordered by the day.
	Days     *int32         `json:"days"`
	Price    orderPriceView `json:"price"`
	Customer customerView   `json:"customer"`
	// null unless the order failed.
	Error     *orderErrorView `json:"error"`
	CreatedAt *string         `json:"created_at"`
	// Empty unless the order completed.
	Esims []esimView `json:"esims"`
}

type orderPriceView struct {
	// One eSIM: the plan's price, times the days on per-day plans.
	Unit      json.Number `json:"unit"`
	UnitMinor int64       `json:"unit_minor"`
	// unit x quantity: what was debited.
	Total      json.Number `json:"total"`
	TotalMinor int64       `json:"total_minor"`
	Currency   string      `json:"currency"`
}

// customerView is the order's customer, null where the order gave none, as
// the public API has it.
type customerView struct {
	Name      *string `json:"name"`
	Email     *string `json:"email"`
	Reference *string `json:"reference"`
}

type orderErrorView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// esimView is an eSIM in --json output: everything the partner got, and
// its matching id, account and plan.
type esimView struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	AccountID   string `json:"account_id"`
	Environment string `json:"environment"`
	PlanID      string `json:"plan_id"`
	PlanName    string `json:"plan_name"`
	PerDay      bool   `json:"per_day"`
	// The countries the eSIM's plan covered when ordered: what a top-up
	// must cover.
	Countries      []string `json:"countries"`
	ICCID          string   `json:"iccid"`
	QRCodeURL      string   `json:"qr_code_url"`
	ActivationCode string   `json:"activation_code"`
	SMDPAddress    string   `json:"smdp_address"`
	MatchingID     string   `json:"matching_id"`
	// ALLOCATED, INSTALLED, ACTIVE, DEPLETED or EXPIRED.
	Status       string          `json:"status"`
	ValidityDays int32           `json:"validity_days"`
	Data         esimDataView    `json:"data"`
	Install      esimInstallView `json:"install"`
	// null until the eSIM reached the status that sets them.
	InstalledAt *string `json:"installed_at"`
	ActivatedAt *string `json:"activated_at"`
	ExpiresAt   *string `json:"expires_at"`
	// Oldest first.
	TopUps    []topUpView `json:"topups"`
	CreatedAt *string     `json:"created_at"`
}

type esimDataView struct {
	Unlimited bool `json:"unlimited"`
	// null when unlimited.
	TotalBytes *int64 `json:"total_bytes"`
	UsedBytes  int64  `json:"used_bytes"`
	// total - used, never below 0; null when unlimited.
	RemainingBytes *int64 `json:"remaining_bytes"`
	// When usage was last read from the network.
	UpdatedAt *string `json:"updated_at"`
}

// topUpView is a top-up in --json output, shaped as the public API's,
// with money as priceView has it.
type topUpView struct {
	ID     string `json:"id"`
	EsimID string `json:"esim_id"`
	PlanID string `json:"plan_id"`
	// Days added; bytes added, 0 on unlimited plans.
	Days  int32          `json:"days"`
	Bytes int64          `json:"bytes"`
	Price topUpPriceView `json:"price"`
	// pending, completed or failed.
	Status string `json:"status"`
	// null unless the top-up failed.
	Error     *orderErrorView `json:"error"`
	CreatedAt *string         `json:"created_at"`
}

type topUpPriceView struct {
	Amount      json.Number `json:"amount"`
	AmountMinor int64       `json:"amount_minor"`
	Currency    string      `json:"currency"`
}

type esimInstallView struct {
	Instructions         string `json:"instructions"`
	IOSUniversalLink     string `json:"ios_universal_link"`
	AndroidUniversalLink string `json:"android_universal_link"`
}

func viewOrder(o *orderingv1.Order) orderView {
	p, cu := o.GetPrice(), o.GetCustomer()
	v := orderView{
		ID: o.GetId(), AccountID: o.GetAccountId(), Environment: o.GetEnvironment().ShortName(),
		Status: orderStatus(o.GetStatus()), PlanID: o.GetPlanId(), Quantity: o.GetQuantity(),
		Price: orderPriceView{
			Unit: json.Number(money.Decimal(p.GetUnitMinor())), UnitMinor: p.GetUnitMinor(),
			Total: json.Number(money.Decimal(p.GetTotalMinor())), TotalMinor: p.GetTotalMinor(),
			Currency: p.GetCurrency(),
		},
		Customer:  customerView{Name: orNull(cu.GetName()), Email: orNull(cu.GetEmail()), Reference: orNull(cu.GetReference())},
		CreatedAt: timestamp(o.GetCreatedAt()),
		Esims:     make([]esimView, 0, len(o.GetEsims())),
	}
	if o.GetPerDay() {
		d := o.GetDays()
		v.Days = &d
	}
	if e := o.GetError(); e != nil {
		v.Error = &orderErrorView{Code: e.GetCode(), Message: e.GetMessage()}
	}
	for _, e := range o.GetEsims() {
		v.Esims = append(v.Esims, viewEsim(e))
	}
	return v
}

func viewEsim(e *orderingv1.Esim) esimView {
	d, in := e.GetData(), e.GetInstall()
	v := esimView{
		ID: e.GetId(), OrderID: e.GetOrderId(), AccountID: e.GetAccountId(), Environment: e.GetEnvironment().ShortName(),
		PlanID: e.GetPlanId(), PlanName: e.GetPlanName(), PerDay: e.GetPerDay(), Countries: e.GetCountries(), ICCID: e.GetIccid(),
		QRCodeURL: e.GetQrCodeUrl(), ActivationCode: e.GetActivationCode(), SMDPAddress: e.GetSmdpAddress(),
		MatchingID: e.GetMatchingId(), Status: e.GetStatus(), ValidityDays: e.GetValidityDays(),
		Data: esimDataView{Unlimited: d.GetUnlimited(), UsedBytes: d.GetUsedBytes(), UpdatedAt: timestamp(d.GetUpdatedAt())},
		Install: esimInstallView{
			Instructions: in.GetInstructions(), IOSUniversalLink: in.GetIosUniversalLink(), AndroidUniversalLink: in.GetAndroidUniversalLink(),
		},
		InstalledAt: timestamp(e.GetInstalledAt()),
		ActivatedAt: timestamp(e.GetActivatedAt()),
		ExpiresAt:   timestamp(e.GetExpiresAt()),
		TopUps:      make([]topUpView, 0, len(e.GetTopups())),
		CreatedAt:   timestamp(e.GetCreatedAt()),
	}
	if v.Countries == nil {
		v.Countries = []string{}
	}
	if !d.GetUnlimited() {
		total, remaining := d.GetTotalBytes(), remainingBytes(d)
		v.Data.TotalBytes, v.Data.RemainingBytes = &total, &remaining
	}
	for _, t := range e.GetTopups() {
		v.TopUps = append(v.TopUps, viewTopUp(t))
	}
	return v
}

func viewTopUp(t *orderingv1.TopUp) topUpView {
	p := t.GetPrice()
	v := topUpView{
		ID: t.GetId(), EsimID: t.GetEsimId(), PlanID: t.GetPlanId(), Days: t.GetDays(), Bytes: t.GetBytes(),
		Price:  topUpPriceView{Amount: json.Number(money.Decimal(p.GetTotalMinor())), AmountMinor: p.GetTotalMinor(), Currency: p.GetCurrency()},
		Status: orderStatus(t.GetStatus()), CreatedAt: timestamp(t.GetCreatedAt()),
	}
	if e := t.GetError(); e != nil {
		v.Error = &orderErrorView{Code: e.GetCode(), Message: e.GetMessage()}
	}
	return v
}

// remainingBytes is what a fixed plan's eSIM has left: used may pass the
// total, by what the network let through before it cut the eSIM off.
func remainingBytes(d *orderingv1.EsimData) int64 {
	return max(d.GetTotalBytes()-d.GetUsedBytes(), 0)
}

// orderStatus names an order's status as the public API does: pending,
// completed or failed.
func orderStatus(s orderingv1.OrderStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "ORDER_STATUS_"))
}

// parseOrderStatus reads --status before any call.
func parseOrderStatus(s string) (orderingv1.OrderStatus, error) {
	for _, st := range []orderingv1.OrderStatus{
		orderingv1.OrderStatus_ORDER_STATUS_PENDING, orderingv1.OrderStatus_ORDER_STATUS_COMPLETED, orderingv1.OrderStatus_ORDER_STATUS_FAILED,
	} {
		if strings.TrimSpace(strings.ToLower(s)) == orderStatus(st) {
			return st, nil
		}
	}
	return 0, usagef("invalid --status %q: want pending, completed or failed", s)
}

func (c *cli) ordersCommand() *cobra.Command {
	return group("orders", "List and inspect partners' orders and their eSIMs", "ordering",
		c.ordersListCommand(), c.ordersGetCommand())
}

func (c *cli) ordersListCommand() *cobra.Command {
	var account, env, status, reference string
	var page, limit int32
	cmd := &cobra.Command{
		Use:   "list --account ID --env sandbox|live [--status pending|completed|failed] [--reference REF] [--page N] [--limit N]",
		Short: "List an account's orders in one environment, newest first",
		Long: fmt.Sprintf(`List an account's sandbox or live orders, newest first, optionally only those
in one status or with one customer reference. A page holds %d orders unless
--limit says otherwise; esimctl orders get shows an order's eSIMs.`, limits.DefaultPageLimit),
		Example: `  esimctl orders list --account 0193... --env sandbox --status failed
  esimctl orders list --account 0193... --env live --reference BOOKING-7 --json`,
		Args: exactArgs(),
		// The account is read first: ordering answers any id, an unknown
		// one with no orders.
		Annotations: map[string]string{serviceAnnotation: "accounts,ordering"},
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	cmd.Flags().StringVar(&env, "env", "", "environment of the orders: sandbox or live (required)")
	cmd.Flags().StringVar(&status, "status", "", "only orders in this status: pending, completed or failed")
	cmd.Flags().StringVar(&reference, "reference", "", "only orders with this customer reference")
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("env")
	addPaging(cmd, &page, &limit, limits.DefaultPageLimit)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		accountID, environment, err := parseAccountEnv(account, env)
		if err != nil {
			return err
		}
		req := &orderingv1.ListOrdersRequest{
			Scope: &orderingv1.Scope{AccountId: accountID, Environment: environment}, Page: page, Limit: limit,
		}
		// An empty filter is refused, not dropped: `--status "$S"` with S
		// unset would otherwise list every order as if they were all in S.
		if status != "" || cmd.Flags().Changed("status") {
			if req.Status, err = parseOrderStatus(status); err != nil {
				return err
			}
		}
		if reference != "" || cmd.Flags().Changed("reference") {
			if strings.TrimSpace(reference) == "" {
				return usagef("invalid --reference %q: want a customer reference, up to %d characters", reference, limits.MaxCustomerText)
			}
			req.Reference = reference
		}
		if err := checkPaging(page, limit); err != nil {
			return err
		}
		if _, err := c.requireAccount(ctx, accountID); err != nil {
			return err
		}
		resp, err := c.ordering().ListOrders(ctx, req)
		if err != nil {
			return c.callFailed(fmt.Sprintf("list %s orders of account %s", environment.ShortName(), accountID), "ordering", err)
		}
		if c.json {
			views := make([]orderView, 0, len(resp.GetOrders()))
			for _, o := range resp.GetOrders() {
				views = append(views, viewOrder(o))
			}
			return c.printJSON(views, newPagination(page, limit, resp.GetTotal()))
		}
		if resp.GetTotal() == 0 && len(resp.GetOrders()) == 0 && req.Status == 0 && req.Reference == "" {
			fmt.Fprintf(c.stdout, "account %s has no %s orders\n", accountID, environment.ShortName())
			return nil
		}
		rows := make([][]any, 0, len(resp.GetOrders()))
		for _, o := range resp.GetOrders() {
			rows = append(rows, []any{o.GetId(), orderStatus(o.GetStatus()), o.GetPlanId(), o.GetQuantity(),
				money.Decimal(o.GetPrice().GetTotalMinor()), o.GetPrice().GetCurrency(), orDash(o.GetCustomer().GetReference()), textTime(o.GetCreatedAt())})
		}
		return c.printList(page, limit, resp.GetTotal(), "orders",
			[]any{"ID", "STATUS", "PLAN", "QUANTITY", "TOTAL", "CURRENCY", "REFERENCE", "CREATED"}, rows)
	})
	return cmd
}

func (c *cli) ordersGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get --order ID",
		Short: "Show one order, of any account, with every eSIM it issued",
		Long: `Show one order, of any account and environment, with every eSIM it issued:
ICCID, status, activation code and QR code URL. --json adds the rest (install
steps, data allowance, SM-DP+ address).`,
		Example: `  esimctl orders get --order 0193...
  esimctl orders get 0193... --json | jq -r '.data.esims[].activation_code'`,
	}
	order := addIDFlag(cmd, "order", "ORDER_ID", "the order's")
	cmd.Args = idArgs(order)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		id, err := order.id(cmd, args)
		if err != nil {
			return err
		}
		// No scope: an operator reads any account's orders.
		o, err := c.ordering().GetOrder(ctx, &orderingv1.GetOrderRequest{Id: id})
		if err != nil {
			return c.callFailed("get order "+id, "ordering", err)
		}
		if c.json {
			return c.printJSON(viewOrder(o), nil)
		}
		return c.printOrder(o)
	})
	return cmd
}

// printOrder writes an order for a human: its fields, then its eSIMs.
func (c *cli) printOrder(o *orderingv1.Order) error {
	p, cu := o.GetPrice(), o.GetCustomer()
	tw := table(c.stdout)
	row(tw, "id:", o.GetId())
	row(tw, "account:", o.GetAccountId())
	row(tw, "environment:", o.GetEnvironment().ShortName())
	row(tw, "status:", orderStatus(o.GetStatus()))
	if e := o.GetError(); e != nil {
		row(tw, "error:", e.GetCode()+": "+e.GetMessage())
	}
	row(tw, "plan:", o.GetPlanId())
	row(tw, "quantity:", o.GetQuantity())
	if o.GetPerDay() {
		row(tw, "days:", o.GetDays())
	}
	row(tw, "unit price:", priceText(p.GetUnitMinor(), p.GetCurrency()))
	row(tw, "total:", priceText(p.GetTotalMinor(), p.GetCurrency()))
	row(tw, "customer:", orDash(cu.GetName()))
	row(tw, "email:", orDash(cu.GetEmail()))
	row(tw, "reference:", orDash(cu.GetReference()))
	row(tw, "created:", textTime(o.GetCreatedAt()))
	row(tw, "esims:", len(o.GetEsims()))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(o.GetEsims()) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	tw = table(c.stdout, "ICCID", "STATUS", "ACTIVATION CODE", "QR CODE URL")
	for _, e := range o.GetEsims() {
		row(tw, e.GetIccid(), e.GetStatus(), e.GetActivationCode(), e.GetQrCodeUrl())
	}
	return tw.Flush()
}
