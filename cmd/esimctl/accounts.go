package main

import (
	"context"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// accountView is an account in --json output.
type accountView struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Currency string `json:"currency"`
	// 0 means the gateway's default limit applies.
	RateLimitPerMinute int32 `json:"rate_limit_per_minute"`
	// False for an account that signed itself up in the portal until
	// enable-live: its live keys are refused.
	LiveEnabled bool    `json:"live_enabled"`
	CreatedAt   *string `json:"created_at"`
}

func viewAccount(a *accountsv1.Account) accountView {
	return accountView{
		ID: a.GetId(), Name: a.GetName(), Currency: a.GetCurrency(),
		RateLimitPerMinute: a.GetRateLimitPerMinute(), LiveEnabled: a.GetLiveEnabled(), CreatedAt: timestamp(a.GetCreatedAt()),
	}
}

// requireAccount reads account id, for a command that takes an account:
// one the accounts service does not know is "account X not found" (exit
// 1) from every such command, before any other call, rather than an empty
// list (the ordering and webhook services keep no accounts of their own,
// so they answer any id) or a not_found that could be the key's.
func (c *cli) requireAccount(ctx context.Context, id string) (*accountsv1.Account, error) {
	if err := c.checkService("accounts"); err != nil {
		return nil, err
	}
	a, err := c.accounts().GetAccount(ctx, &accountsv1.GetAccountRequest{Id: id})
	if isNotFound(err) {
		return nil, accountNotFound(id)
	}
	if err != nil {
		return nil, c.callFailed("get account "+id, "accounts", err)
	}
	return a, nil
}

func accountNotFound(id string) error {
	return &failure{msg: fmt.Sprintf("account %s not found; `esimctl accounts list` shows the accounts there are", id)}
}

// liveText says whether the account may use live keys and, when not, how
// an operator changes that.
func liveText(a *accountsv1.Account) string {
	if a.GetLiveEnabled() {
		return "enabled"
	}
	return "disabled (esimctl accounts enable-live --account " + a.GetId() + ")"
}

func rateLimitText(n int32) string {
	if n == 0 {
		return "default"
	}
	return fmt.Sprintf("%d/min", n)
}

func (c *cli) accountsCommand() *cobra.Command {
	return group("accounts", "Create, inspect and tune partner accounts", "accounts",
		c.accountsCreateCommand(), c.accountsEnableLiveCommand(), c.accountsGetCommand(), c.accountsListCommand(), c.accountsRequestsCommand(), c.accountsSetRateLimitCommand())
}

func (c *cli) accountsCreateCommand() *cobra.Command {
	var name, currency string
	var rateLimit int32
	cmd := &cobra.Command{
		Use:   "create --name NAME [--currency USD|EUR|GBP] [--rate-limit N]",
		Short: "Register a partner account",
		Long: `Register a partner account. The currency is fixed for the account's life:
plans are priced and balances kept in it.`,
		Example: `  esimctl accounts create --name "Acme Travel" --currency EUR`,
		Args:    exactArgs(),
	}
	cmd.Flags().StringVar(&name, "name", "", "display name of the partner (required)")
	cmd.Flags().StringVar(&currency, "currency", "USD", "account currency: USD, EUR or GBP")
	cmd.Flags().Int32Var(&rateLimit, "rate-limit", 0, fmt.Sprintf("requests per minute for each API key, at most %d (0: the gateway's default)", limits.MaxRateLimitPerMinute))
	_ = cmd.MarkFlagRequired("name")
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if err := checkName(cmd, "name", name, "give the partner's name, as it should appear in the portal"); err != nil {
			return err
		}
		cur, err := parseCurrency(currency)
		if err != nil {
			return err
		}
		if err := checkRateLimit("--rate-limit", rateLimit); err != nil {
			return err
		}
		a, err := c.accounts().CreateAccount(ctx, &accountsv1.CreateAccountRequest{
			Name: name, Currency: cur, RateLimitPerMinute: rateLimit,
		})
		if err != nil {
			return c.callFailed("create account", "accounts", err)
		}
		if c.json {
			return c.printJSON(viewAccount(a), nil)
		}
		fmt.Fprintf(c.stdout, "created account %s (%s, %s, rate limit %s)\n", a.GetId(), a.GetName(), a.GetCurrency(), rateLimitText(a.GetRateLimitPerMinute()))
		return nil
	})
	return cmd
}

func (c *cli) accountsGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get --account ID",
		Short:   "Show one account",
		Example: "  esimctl accounts get --account 0193...\n  esimctl accounts get 0193...",
	}
	account := addIDFlag(cmd, "account", "ACCOUNT_ID", "the account's")
	cmd.Args = idArgs(account)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		id, err := account.id(cmd, args)
		if err != nil {
			return err
		}
		a, err := c.accounts().GetAccount(ctx, &accountsv1.GetAccountRequest{Id: id})
		if isNotFound(err) {
			return accountNotFound(id)
		}
		if err != nil {
			return c.callFailed("get account "+id, "accounts", err)
		}
		if c.json {
			return c.printJSON(viewAccount(a), nil)
		}
		tw := table(c.stdout)
		row(tw, "id:", a.GetId())
		row(tw, "name:", a.GetName())
		row(tw, "currency:", a.GetCurrency())
		row(tw, "rate limit:", rateLimitText(a.GetRateLimitPerMinute()))
		row(tw, "live:", liveText(a))
		row(tw, "created:", textTime(a.GetCreatedAt()))
		return tw.Flush()
	})
	return cmd
}

func (c *cli) accountsListCommand() *cobra.Command {
	var page, limit int32
	cmd := &cobra.Command{
		Use:   "list [--page N] [--limit N]",
		Short: "List partner accounts, newest first",
		Args:  exactArgs(),
	}
	addPaging(cmd, &page, &limit, limits.DefaultPageLimit)
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		if err := checkPaging(page, limit); err != nil {
			return err
		}
		resp, err := c.accounts().ListAccounts(ctx, &accountsv1.ListAccountsRequest{Page: page, Limit: limit})
		if err != nil {
			return c.callFailed("list accounts", "accounts", err)
		}
		if c.json {
			views := make([]accountView, 0, len(resp.GetAccounts()))
			for _, a := range resp.GetAccounts() {
				views = append(views, viewAccount(a))
			}
			return c.printJSON(views, newPagination(page, limit, resp.GetTotal()))
		}
		rows := make([][]any, 0, len(resp.GetAccounts()))
		for _, a := range resp.GetAccounts() {
			live := "yes"
			if !a.GetLiveEnabled() {
				live = "no"
			}
			rows = append(rows, []any{a.GetId(), a.GetName(), a.GetCurrency(), rateLimitText(a.GetRateLimitPerMinute()), live, textTime(a.GetCreatedAt())})
		}
		return c.printList(page, limit, resp.GetTotal(), "accounts", []any{"ID", "NAME", "CURRENCY", "RATE LIMIT", "LIVE", "CREATED"}, rows)
	})
	return cmd
}

func (c *cli) accountsEnableLiveCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "enable-live --account ID",
		Short: "Let an account that signed up in the portal create live API keys",
		Long: `Let an account create live API keys, which spend real money with real
providers. Accounts that sign themselves up in the portal start with sandbox
only; accounts created with esimctl have live from the start. Enabling
again changes nothing; there is no disabling (revoke the live keys instead).`,
		Example: `  esimctl accounts enable-live --account 0193...`,
	}
	account := addIDFlag(cmd, "account", "ACCOUNT_ID", "the account's")
	cmd.Args = idArgs(account)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		id, err := account.id(cmd, args)
		if err != nil {
			return err
		}
		a, err := c.accounts().EnableLive(ctx, &accountsv1.EnableLiveRequest{AccountId: id})
		if isNotFound(err) {
			return accountNotFound(id)
		}
		if err != nil {
			return c.callFailed("enable live for account "+id, "accounts", err)
		}
		if c.json {
			return c.printJSON(viewAccount(a), nil)
		}
		fmt.Fprintf(c.stdout, "account %s (%s): live %s\n", a.GetId(), a.GetName(), liveText(a))
		return nil
	})
	return cmd
}

func (c *cli) accountsSetRateLimitCommand() *cobra.Command {
	var account string
	var perMinute int32
	cmd := &cobra.Command{
		Use:   "set-rate-limit --account ID --per-minute N",
		Short: "Set the requests per minute allowed to each API key of an account",
		Long: fmt.Sprintf(`Set the requests per minute allowed to each API key of an account, at most %d.
0 goes back to the gateway's default (RATE_LIMIT_PER_MINUTE, 1200 unless configured).`, limits.MaxRateLimitPerMinute),
		Example: `  esimctl accounts set-rate-limit --account 0193... --per-minute 6000`,
		Args:    exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	cmd.Flags().Int32Var(&perMinute, "per-minute", 0, fmt.Sprintf("requests per minute per key, at most %d; 0 for the default (required)", limits.MaxRateLimitPerMinute))
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("per-minute")
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		if err := checkRateLimit("--per-minute", perMinute); err != nil {
			return err
		}
		a, err := c.accounts().SetRateLimit(ctx, &accountsv1.SetRateLimitRequest{AccountId: accountID, RateLimitPerMinute: perMinute})
		if isNotFound(err) {
			return accountNotFound(accountID)
		}
		if err != nil {
			return c.callFailed("set rate limit of account "+accountID, "accounts", err)
		}
		if c.json {
			return c.printJSON(viewAccount(a), nil)
		}
		fmt.Fprintf(c.stdout, "account %s: rate limit %s\n", a.GetId(), rateLimitText(a.GetRateLimitPerMinute()))
		return nil
	})
	return cmd
}

// checkRateLimit applies the accounts service's bounds to a rate limit
// given by flag, so that an out-of-range value is a usage error (exit 2)
// before any call, not an operation the service refuses (exit 1).
func checkRateLimit(flag string, perMinute int32) error {
	if perMinute < 0 || perMinute > limits.MaxRateLimitPerMinute {
		return usagef("invalid %s %d: want 0 (the gateway's default) to %d", flag, perMinute, limits.MaxRateLimitPerMinute)
	}
	return nil
}

// parseCurrency accepts the currencies the platform prices in; checking here
// gives a usage error before any call is made.
func parseCurrency(s string) (string, error) {
	cur := strings.ToUpper(strings.TrimSpace(s))
	if slices.Contains(limits.Currencies, cur) {
		return cur, nil
	}
	return "", usagef("invalid --currency %q: want %s", s, orList(limits.Currencies))
}

// The bounds of --page and --limit. Every service that lists takes the
// same (docs/decisions.md: pages up to 10,000 on every list, 1 to 100 items
// each); a test holds the catalogue's to these.
const (
	maxPage      = limits.MaxPage
	maxPageLimit = limits.MaxPageLimit
)

// addPaging adds --page and --limit; defaultLimit is the list's page size
// when --limit is not given.
func addPaging(cmd *cobra.Command, page, limit *int32, defaultLimit int32) {
	cmd.Flags().Int32Var(page, "page", 1, fmt.Sprintf("page number, 1 to %d", maxPage))
	cmd.Flags().Int32Var(limit, "limit", defaultLimit, fmt.Sprintf("items per page, 1 to %d", maxPageLimit))
}

// checkPaging applies the services' bounds to --page and --limit, so that
// an out-of-range value is a usage error (exit 2) before any call, not an
// operation the service refuses (exit 1).
func checkPaging(page, limit int32) error {
	if page < 1 || page > maxPage {
		return usagef("invalid --page %d: want 1 to %d", page, maxPage)
	}
	if limit < 1 || limit > maxPageLimit {
		return usagef("invalid --limit %d: want 1 to %d", limit, maxPageLimit)
	}
	return nil
}

// printList writes one page of a list for a human: its rows under the
// header, then where the page stands when there are more; a page without
// rows says so instead of an empty table. Scripts use --json.
//
// Every list orders its columns alike, so an operator finds them in the
// same place in each: ID first; then what names the item (NAME, ICCID,
// TYPE, KIND); STATUS, where the item has one; the item's details; and
// CREATED last, in RFC 3339 UTC, as every time column is. Headers are
// the JSON field's name in capitals, with spaces ("DATA USED").
func (c *cli) printList(page, limit, total int32, noun string, header []any, rows [][]any) error {
	if len(rows) == 0 {
		fmt.Fprintf(c.stdout, "no %s on page %d (%d in total)\n", noun, page, total)
		return nil
	}
	tw := table(c.stdout, header...)
	for _, r := range rows {
		row(tw, r...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch pages := (int64(total) + int64(limit) - 1) / int64(limit); {
	case pages <= 1:
	case int64(page) < pages:
		fmt.Fprintf(c.stdout, "page %d of %d (%d %s; --page %d for the next)\n", page, pages, total, noun, page+1)
	default:
		fmt.Fprintf(c.stdout, "page %d of %d (%d %s; the last)\n", page, pages, total, noun)
	}
	return nil
}
