package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/money"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
)

// entryView is a ledger entry in --json output. Amounts come both as the
// API shows money (a JSON number with two decimals, written from integers,
// never through a float) and in minor units for exact arithmetic.
type entryView struct {
	ID          string `json:"id"`
	AccountID   string `json:"account_id"`
	Environment string `json:"environment"`
	// top_up, debit or refund; amount is always positive, the kind says
	// which way it moved.
	Kind              string      `json:"kind"`
	Amount            json.Number `json:"amount"`
	AmountMinor       int64       `json:"amount_minor"`
	Currency          string      `json:"currency"`
	Reference         string      `json:"reference"`
	BalanceAfter      json.Number `json:"balance_after"`
	BalanceAfterMinor int64       `json:"balance_after_minor"`
	Actor             string      `json:"actor"`
	Note              *string     `json:"note"`
	CreatedAt         *string     `json:"created_at"`
}

func viewEntry(e *walletv1.LedgerEntry) entryView {
	return entryView{
		ID: e.GetId(), AccountID: e.GetAccountId(), Environment: e.GetEnvironment().ShortName(), Kind: entryKind(e.GetKind()),
		Amount: json.Number(money.Decimal(e.GetAmountMinor())), AmountMinor: e.GetAmountMinor(), Currency: e.GetCurrency(),
		Reference:    e.GetReference(),
		BalanceAfter: json.Number(money.Decimal(e.GetBalanceAfterMinor())), BalanceAfterMinor: e.GetBalanceAfterMinor(),
		Actor: e.GetActor(), Note: orNull(e.GetNote()), CreatedAt: timestamp(e.GetCreatedAt()),
	}
}

// balanceView is a balance in --json output.
type balanceView struct {
	AccountID   string      `json:"account_id"`
	Environment string      `json:"environment"`
	Amount      json.Number `json:"amount"`
	AmountMinor int64       `json:"amount_minor"`
	Currency    string      `json:"currency"`
	// null for a balance never topped up.
	UpdatedAt *string `json:"updated_at"`
}

// entryKind names a ledger entry's kind as the wallet does: top_up, debit
// or refund.
func entryKind(k walletv1.EntryKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "ENTRY_KIND_"))
}

// signedAmount is a ledger amount as a reader of the ledger wants it: what
// it did to the balance, "+100.00 USD" or "-12.50 USD".
func signedAmount(e *walletv1.LedgerEntry) string {
	if e.GetKind() == walletv1.EntryKind_ENTRY_KIND_DEBIT {
		return priceText(-e.GetAmountMinor(), e.GetCurrency())
	}
	return "+" + priceText(e.GetAmountMinor(), e.GetCurrency())
}

func (c *cli) walletCommand() *cobra.Command {
	// Every wallet command reads the account first: the balance is held
	// in the account's currency, and an unknown account is said to be one
	// rather than shown an empty balance.
	return group("wallet", "Top up partners' prepaid balances and read them and their ledgers", "accounts,wallet",
		c.walletTopUpCommand(), c.walletBalanceCommand(), c.walletLedgerCommand())
}

// balanceFlags are the flags that name a balance: --account and --env,
// both required.
func balanceFlags(cmd *cobra.Command, account, env *string) {
	cmd.Flags().StringVar(account, "account", "", "the account's `ID` (required)")
	cmd.Flags().StringVar(env, "env", "", "environment of the balance: sandbox or live (required)")
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("env")
}

// parseAccountEnv checks --account and --env before any call.
func parseAccountEnv(account, env string) (string, accountsv1.Environment, error) {
	accountID, err := parseID("--account", account)
	if err != nil {
		return "", 0, err
	}
	environment, err := parseEnv(env)
	if err != nil {
		return "", 0, err
	}
	return accountID, environment, nil
}

// parseAmount reads --amount as minor units from its digits alone, never
// through a float: a positive plain decimal with at most two decimals,
// within what the wallet moves at once.
func parseAmount(s string) (int64, error) {
	minor, err := money.ParseDecimal(s)
	if err != nil {
		return 0, usagef("invalid --amount %q: %v", s, err)
	}
	if minor < 1 || minor > limits.MaxAmountMinor {
		return 0, usagef("invalid --amount %q: want more than 0 and at most %s", s, money.Decimal(limits.MaxAmountMinor))
	}
	return minor, nil
}

// checkReference applies the wallet's rule for a reference (1 to 255
// printable ASCII characters, spaces kept) before any call.
func checkReference(ref string) error {
	if ref != "" && strings.TrimSpace(ref) == "" {
		// Spaces alone are printable, but no one could tell such a
		// reference from none, nor type it again to repeat a top-up.
		return usagef("invalid --reference %q: blank; give the top-up's own reference, such as an invoice number, or leave --reference out for a fresh one", ref)
	}
	if ref == "" || len(ref) > limits.MaxReferenceLength ||
		strings.ContainsFunc(ref, func(r rune) bool { return r < ' ' || r > '~' }) {
		return usagef("invalid --reference %q: want 1 to %d printable ASCII characters", ref, limits.MaxReferenceLength)
	}
	return nil
}

// topupWhat is a top-up as messages name it; unknownOutcome reads the
// reference back from its end.
func topupWhat(accountID string, env accountsv1.Environment, reference string) string {
	return fmt.Sprintf("top up account %s %s with reference %q", accountID, env.ShortName(), reference)
}

func (c *cli) walletTopUpCommand() *cobra.Command {
	var account, env, amount, reference, note string
	cmd := &cobra.Command{
		Use:   "topup --account ID --env sandbox|live --amount 100.00 [--reference REF] [--note TEXT]",
		Short: "Credit a partner's balance, in the account's currency",
		Long: fmt.Sprintf(`Credit a partner's sandbox or live balance with --amount, a plain decimal
with at most two decimals (100, 100.5, 100.50), in the account's currency.

A top-up is idempotent by its reference: a second top-up with the same
--reference returns the first one's ledger entry and moves no money, so a
top-up whose outcome is unknown (a timeout, a lost connection) is safe to
run again with the same --reference. Without --reference, esimctl makes a
fresh one (a UUID) and prints it; running the command again without it
tops up again. A reference is 1 to %d printable ASCII characters; reusing
one for another amount is refused.`, limits.MaxReferenceLength),
		Example: `  esimctl wallet topup --account 0193... --env sandbox --amount 1000.00
  esimctl wallet topup --account 0193... --env live --amount 250 --reference INV-2041 --note "invoice 2041"`,
		Args: exactArgs(),
	}
	balanceFlags(cmd, &account, &env)
	cmd.Flags().StringVar(&amount, "amount", "", "amount to credit, such as 100.00, in the account's currency (required)")
	cmd.Flags().StringVar(&reference, "reference", "", "idempotency key of the top-up, such as an invoice number (default: a fresh UUID, printed)")
	cmd.Flags().StringVar(&note, "note", "", fmt.Sprintf("free text kept on the ledger entry, up to %d characters", limits.MaxNoteLength))
	_ = cmd.MarkFlagRequired("amount")
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		accountID, environment, err := parseAccountEnv(account, env)
		if err != nil {
			return err
		}
		minor, err := parseAmount(amount)
		if err != nil {
			return err
		}
		// An empty --reference is refused, not replaced: `--reference
		// "$REF"` with REF unset would otherwise top up again on every
		// run, the one thing a reference is there to prevent.
		generated := !cmd.Flags().Changed("reference")
		if generated {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			reference = id.String()
		} else if err := checkReference(reference); err != nil {
			return err
		}
		a, err := c.requireAccount(ctx, accountID)
		if err != nil {
			return err
		}
		what := topupWhat(accountID, environment, reference)
		e, err := c.wallet().TopUp(ctx, &walletv1.TopUpRequest{
			AccountId: accountID, Environment: environment, Currency: a.GetCurrency(),
			AmountMinor: minor, Reference: reference, Note: note,
		})
		if twerr, ok := errors.AsType[twirp.Error](err); ok && twerr.Code() == twirp.AlreadyExists && twerr.Meta("http_error_from_intermediary") == "" {
			return &failure{msg: fmt.Sprintf("%s: the reference was used for a top-up of another amount; nothing moved: give a new --reference, or none", what)}
		}
		if err != nil {
			return c.callFailed(what, "wallet", err)
		}
		if c.json {
			return c.printJSON(viewEntry(e), nil)
		}
		if err := c.printEntry(e); err != nil {
			return err
		}
		if generated {
			fmt.Fprintf(c.stdout, "reference %s was made for this top-up: running the command again with --reference %s is safe (it tops up at most once); running it again without --reference tops up again\n",
				reference, reference)
		}
		return nil
	})
	return cmd
}

// printEntry writes one ledger entry for a human.
func (c *cli) printEntry(e *walletv1.LedgerEntry) error {
	tw := table(c.stdout)
	row(tw, "entry:", e.GetId())
	row(tw, "account:", e.GetAccountId())
	row(tw, "environment:", e.GetEnvironment().ShortName())
	row(tw, "kind:", entryKind(e.GetKind()))
	row(tw, "amount:", priceText(e.GetAmountMinor(), e.GetCurrency()))
	row(tw, "balance after:", priceText(e.GetBalanceAfterMinor(), e.GetCurrency()))
	row(tw, "reference:", e.GetReference())
	row(tw, "actor:", e.GetActor())
	row(tw, "note:", orDash(e.GetNote()))
	row(tw, "created:", textTime(e.GetCreatedAt()))
	return tw.Flush()
}

func (c *cli) walletBalanceCommand() *cobra.Command {
	var account, env string
	cmd := &cobra.Command{
		Use:   "balance --account ID --env sandbox|live",
		Short: "Show a partner's sandbox or live balance",
		Long: `Show a partner's sandbox or live balance, in the account's currency. A
balance never topped up is 0.00.`,
		Example: `  esimctl wallet balance --account 0193... --env sandbox`,
		Args:    exactArgs(),
	}
	balanceFlags(cmd, &account, &env)
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		accountID, environment, err := parseAccountEnv(account, env)
		if err != nil {
			return err
		}
		a, err := c.requireAccount(ctx, accountID)
		if err != nil {
			return err
		}
		b, err := c.wallet().GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: accountID, Environment: environment, Currency: a.GetCurrency()})
		if err != nil {
			return c.callFailed(fmt.Sprintf("get %s balance of account %s", environment.ShortName(), accountID), "wallet", err)
		}
		if c.json {
			return c.printJSON(balanceView{
				AccountID: b.GetAccountId(), Environment: b.GetEnvironment().ShortName(),
				Amount: json.Number(money.Decimal(b.GetAmountMinor())), AmountMinor: b.GetAmountMinor(), Currency: b.GetCurrency(),
				UpdatedAt: timestamp(b.GetUpdatedAt()),
			}, nil)
		}
		tw := table(c.stdout)
		row(tw, "account:", b.GetAccountId())
		row(tw, "environment:", b.GetEnvironment().ShortName())
		row(tw, "balance:", priceText(b.GetAmountMinor(), b.GetCurrency()))
		row(tw, "updated:", textTime(b.GetUpdatedAt()))
		return tw.Flush()
	})
	return cmd
}

func (c *cli) walletLedgerCommand() *cobra.Command {
	var account, env string
	var page, limit int32
	cmd := &cobra.Command{
		Use:   "ledger --account ID --env sandbox|live [--page N] [--limit N]",
		Short: "List a balance's ledger, newest first: top-ups, debits and refunds",
		Long: fmt.Sprintf(`List the ledger of a partner's sandbox or live balance, newest first: every
top-up, debit (an order) and refund (a failed order), with the balance
right after it and who made it. A page holds %d entries unless --limit says
otherwise.`, limits.DefaultPageLimit),
		Example: `  esimctl wallet ledger --account 0193... --env sandbox --limit 50`,
		Args:    exactArgs(),
	}
	balanceFlags(cmd, &account, &env)
	addPaging(cmd, &page, &limit, limits.DefaultPageLimit)
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		accountID, environment, err := parseAccountEnv(account, env)
		if err != nil {
			return err
		}
		if err := checkPaging(page, limit); err != nil {
			return err
		}
		if _, err := c.requireAccount(ctx, accountID); err != nil {
			return err
		}
		resp, err := c.wallet().ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: accountID, Environment: environment, Page: page, Limit: limit})
		if err != nil {
			return c.callFailed(fmt.Sprintf("list %s ledger of account %s", environment.ShortName(), accountID), "wallet", err)
		}
		if c.json {
			views := make([]entryView, 0, len(resp.GetEntries()))
			for _, e := range resp.GetEntries() {
				views = append(views, viewEntry(e))
			}
			return c.printJSON(views, newPagination(page, limit, resp.GetTotal()))
		}
		if resp.GetTotal() == 0 && len(resp.GetEntries()) == 0 {
			fmt.Fprintf(c.stdout, "account %s has no %s ledger entries\n", accountID, environment.ShortName())
			return nil
		}
		rows := make([][]any, 0, len(resp.GetEntries()))
		for _, e := range resp.GetEntries() {
			rows = append(rows, []any{e.GetId(), entryKind(e.GetKind()), signedAmount(e),
				priceText(e.GetBalanceAfterMinor(), e.GetCurrency()), e.GetReference(), e.GetActor(), textTime(e.GetCreatedAt())})
		}
		return c.printList(page, limit, resp.GetTotal(), "entries", []any{"ID", "KIND", "AMOUNT", "BALANCE AFTER", "REFERENCE", "ACTOR", "CREATED"}, rows)
	})
	return cmd
}
