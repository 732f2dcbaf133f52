package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/proto/limits"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
)

// esimStatuses are an eSIM's statuses in the order it moves through them,
// as the public API spells them.
var esimStatuses = []string{"ALLOCATED", "INSTALLED", "ACTIVE", "DEPLETED", "EXPIRED"}

// simulateActions are what esims simulate has happen, in the order an
// eSIM allows them.
var simulateActions = []string{"install", "activate", "consume", "expire"}

// maxICCIDLength is the longest ICCID (ITU-T E.118), as ordering bounds
// the filter.
const maxICCIDLength = 22

// parseEsimStatus reads --status before any call, in either case.
func parseEsimStatus(s string) (string, error) {
	if status := strings.ToUpper(strings.TrimSpace(s)); slices.Contains(esimStatuses, status) {
		return status, nil
	}
	return "", usagef("invalid --status %q: want %s", s, orList(esimStatuses))
}

// parseICCID reads --iccid before any call: digits only, as printed on
// the card and in every list.
func parseICCID(s string) (string, error) {
	if s == "" || len(s) > maxICCIDLength || strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		return "", usagef("invalid --iccid %q: want an ICCID, up to %d digits", s, maxICCIDLength)
	}
	return s, nil
}

// parseBytes reads --bytes: a whole number of bytes, or of KB, MB or GB
// counted as dataSize prints them (1 GB is 2^30 bytes), at least 1 byte.
func parseBytes(s string) (int64, error) {
	text := strings.ToUpper(strings.TrimSpace(s))
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(text, u.suffix); ok {
			text, unit = strings.TrimSpace(rest), u.size
			break
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 1 || n > (1<<62)/unit || strings.HasPrefix(text, "+") {
		return 0, usagef("invalid --bytes %q: want a whole number of bytes, at least 1, or of KB, MB or GB (such as 600MB)", s)
	}
	return n * unit, nil
}

// bytesText is a byte count for a human: exact, and in the units plans
// are sold in when it is large enough for them.
func bytesText(n int64) string {
	if n < 1<<20 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	return fmt.Sprintf("%d bytes (%s)", n, dataSize(n))
}

// usageText is an eSIM's data use in a table cell: "1.2 GB of 5 GB", or
// "300 MB (unlimited)".
func usageText(d *orderingv1.EsimData) string {
	if d.GetUnlimited() {
		return dataSize(d.GetUsedBytes()) + " (unlimited)"
	}
	return dataSize(d.GetUsedBytes()) + " of " + dataSize(d.GetTotalBytes())
}

func (c *cli) esimsCommand() *cobra.Command {
	return group("esims", "List and inspect eSIMs after their sale, and move sandbox ones as a device would", "ordering",
		c.esimsListCommand(), c.esimsGetCommand(), c.esimsSimulateCommand())
}

func (c *cli) esimsListCommand() *cobra.Command {
	var account, env, iccid, status, order string
	var page, limit int32
	cmd := &cobra.Command{
		Use:   "list [--account ID --env sandbox|live] [--iccid ICCID] [--status " + strings.Join(esimStatuses, "|") + "] [--order ID] [--page N] [--limit N]",
		Short: "List eSIMs with their status and data use, newest first",
		Long: fmt.Sprintf(`List eSIMs, newest first, each with its status, data use and expiry: what
to open when a traveller's eSIM does not work. --account and --env go
together; without them, every account's eSIMs are listed, so --iccid finds
an eSIM from its card alone.

An eSIM moves only forward: ALLOCATED (issued) -> INSTALLED (on a device) ->
ACTIVE (attached to a network; its validity runs) -> DEPLETED (a fixed plan's
data used up; a top-up makes it ACTIVE again) or EXPIRED (final). A page holds
%d eSIMs unless --limit says otherwise; esimctl esims get shows an eSIM's
top-ups.`, limits.DefaultPageLimit),
		Example: `  esimctl esims list --iccid 8988247000000000004
  esimctl esims list --account 0193... --env live --status DEPLETED
  esimctl esims list --order 0193... --json`,
		Args: exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "only the eSIMs of the account with this `ID` (with --env)")
	cmd.Flags().StringVar(&env, "env", "", "only the eSIMs of this environment, sandbox or live (with --account)")
	cmd.Flags().StringVar(&iccid, "iccid", "", "only the eSIM with this ICCID")
	cmd.Flags().StringVar(&status, "status", "", "only eSIMs in this status: "+orList(esimStatuses))
	cmd.Flags().StringVar(&order, "order", "", "only the eSIMs of the order with this `ID`")
	addPaging(cmd, &page, &limit, limits.DefaultPageLimit)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		req := &orderingv1.ListEsimsRequest{Page: page, Limit: limit}
		// A scope is an account in an environment: half of one would
		// list every account's eSIMs while looking like a filter.
		switch accountSet, envSet := cmd.Flags().Changed("account"), cmd.Flags().Changed("env"); {
		case accountSet && envSet:
			accountID, environment, err := parseAccountEnv(account, env)
			if err != nil {
				return err
			}
			req.Scope = &orderingv1.Scope{AccountId: accountID, Environment: environment}
		case accountSet:
			return usagef("--account needs --env (sandbox or live): an account's eSIMs are listed one environment at a time")
		case envSet:
			return usagef("--env needs --account: without both, every account's eSIMs are listed")
		}
		// An empty filter is refused, not dropped: `--status "$S"` with S
		// unset would otherwise list every eSIM as if all were in S.
		var err error
		if cmd.Flags().Changed("iccid") {
			if req.Iccid, err = parseICCID(iccid); err != nil {
				return err
			}
		}
		if cmd.Flags().Changed("status") {
			if req.Status, err = parseEsimStatus(status); err != nil {
				return err
			}
		}
		if cmd.Flags().Changed("order") {
			if req.OrderId, err = parseID("--order", order); err != nil {
				return err
			}
		}
		if err := checkPaging(page, limit); err != nil {
			return err
		}
		if req.Scope != nil {
			if _, err := c.requireAccount(ctx, req.Scope.GetAccountId()); err != nil {
				return err
			}
		}
		resp, err := c.ordering().ListEsims(ctx, req)
		if err != nil {
			what := "list eSIMs"
			if req.Scope != nil {
				what = fmt.Sprintf("list %s eSIMs of account %s", req.Scope.GetEnvironment().ShortName(), req.Scope.GetAccountId())
			}
			return c.callFailed(what, "ordering", err)
		}
		if c.json {
			views := make([]esimView, 0, len(resp.GetEsims()))
			for _, e := range resp.GetEsims() {
				views = append(views, viewEsim(e))
			}
			return c.printJSON(views, newPagination(page, limit, resp.GetTotal()))
		}
		if resp.GetTotal() == 0 && len(resp.GetEsims()) == 0 && req.Iccid == "" && req.Status == "" && req.OrderId == "" {
			if req.Scope != nil {
				fmt.Fprintf(c.stdout, "account %s has no %s eSIMs\n", req.Scope.GetAccountId(), req.Scope.GetEnvironment().ShortName())
			} else {
				fmt.Fprintln(c.stdout, "no eSIMs")
			}
			return nil
		}
		rows := make([][]any, 0, len(resp.GetEsims()))
		for _, e := range resp.GetEsims() {
			rows = append(rows, []any{e.GetId(), e.GetIccid(), e.GetStatus(), e.GetPlanName(),
				usageText(e.GetData()), textTime(e.GetExpiresAt()), e.GetOrderId(), textTime(e.GetCreatedAt())})
		}
		return c.printList(page, limit, resp.GetTotal(), "eSIMs",
			[]any{"ID", "ICCID", "STATUS", "PLAN", "DATA USED", "EXPIRES", "ORDER", "CREATED"}, rows)
	})
	return cmd
}

func (c *cli) esimsGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get --esim ID",
		Short: "Show one eSIM, of any account, with its lifecycle, data use and top-ups",
		Long: `Show one eSIM, of any account and environment: its status, when it was
installed, activated and expires, its data used, total and remaining, and
every top-up bought for it. --json adds the rest (install steps, SM-DP+
address, the countries a top-up must cover).`,
		Example: `  esimctl esims get --esim 0193...
  esimctl esims get 0193... --json | jq .data.data.remaining_bytes`,
	}
	esim := addIDFlag(cmd, "esim", "ESIM_ID", "the eSIM's")
	cmd.Args = idArgs(esim)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		id, err := esim.id(cmd, args)
		if err != nil {
			return err
		}
		// No scope: an operator reads any account's eSIMs.
		e, err := c.ordering().GetEsim(ctx, &orderingv1.GetEsimRequest{Id: id})
		if err != nil {
			return c.callFailed("get eSIM "+id, "ordering", err)
		}
		if c.json {
			return c.printJSON(viewEsim(e), nil)
		}
		return c.printEsim(e)
	})
	return cmd
}

func (c *cli) esimsSimulateCommand() *cobra.Command {
	var account, action, size string
	cmd := &cobra.Command{
		Use:   "simulate --esim ID --account ID --action install|activate|consume|expire [--bytes N]",
		Short: "Move a sandbox eSIM as a device and the network would, with the webhooks they cause",
		Long: `Move a sandbox eSIM as a device and its network would, exactly as a partner's
POST /v1/sandbox/esims/{id}/simulate does, and show it afterwards: install
(ALLOCATED -> INSTALLED), activate (INSTALLED -> ACTIVE; its validity starts),
consume --bytes N (data used while ACTIVE; at 50, 80 and 100 percent of a
fixed plan the partner gets esim.usage, and at 100 it is DEPLETED) and expire
(EXPIRED now). Each sends the partner's webhooks as the real event would.
An action out of order (activate before install, consume when not ACTIVE) is
refused. Live eSIMs move only as their network says: not found here.`,
		Example: `  esimctl esims simulate --esim 0193... --account 0193... --action install
  esimctl esims simulate --esim 0193... --account 0193... --action consume --bytes 600MB`,
		Annotations: map[string]string{serviceAnnotation: "accounts,ordering"},
	}
	esim := addIDFlag(cmd, "esim", "ESIM_ID", "the sandbox eSIM's")
	cmd.Args = idArgs(esim)
	cmd.Flags().StringVar(&account, "account", "", "the `ID` of the sandbox eSIM's account (required)")
	cmd.Flags().StringVar(&action, "action", "", "what happens: "+orList(simulateActions)+" (required)")
	cmd.Flags().StringVar(&size, "bytes", "", "with consume: the data used, in bytes or with KB, MB or GB (required with consume)")
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("action")
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		id, err := esim.id(cmd, args)
		if err != nil {
			return err
		}
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		act := strings.ToLower(strings.TrimSpace(action))
		if !slices.Contains(simulateActions, act) {
			return usagef("invalid --action %q: want %s", action, orList(simulateActions))
		}
		req := &orderingv1.SimulateEsimRequest{
			Scope:  &orderingv1.Scope{AccountId: accountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
			EsimId: id, Action: act,
		}
		switch bytesSet := cmd.Flags().Changed("bytes"); {
		case act == "consume" && !bytesSet:
			return usagef("--action consume needs --bytes: the data used")
		case act != "consume" && bytesSet:
			return usagef("--bytes goes with --action consume only")
		case bytesSet:
			n, err := parseBytes(size)
			if err != nil {
				return err
			}
			req.Bytes = &n
		}
		if _, err := c.requireAccount(ctx, accountID); err != nil {
			return err
		}
		e, err := c.ordering().SimulateEsim(ctx, req)
		if err != nil {
			return c.callFailed(fmt.Sprintf("simulate %s on eSIM %s", act, id), "ordering", err)
		}
		if c.json {
			return c.printJSON(viewEsim(e), nil)
		}
		return c.printEsim(e)
	})
	return cmd
}

// printEsim writes an eSIM for a human: its fields, then its top-ups.
func (c *cli) printEsim(e *orderingv1.Esim) error {
	d := e.GetData()
	tw := table(c.stdout)
	row(tw, "id:", e.GetId())
	row(tw, "order:", e.GetOrderId())
	row(tw, "account:", e.GetAccountId())
	row(tw, "environment:", e.GetEnvironment().ShortName())
	row(tw, "iccid:", e.GetIccid())
	row(tw, "plan:", e.GetPlanName()+" ("+e.GetPlanId()+")")
	row(tw, "status:", e.GetStatus())
	row(tw, "validity:", fmt.Sprintf("%d days", e.GetValidityDays()))
	row(tw, "created:", textTime(e.GetCreatedAt()))
	row(tw, "installed:", textTime(e.GetInstalledAt()))
	row(tw, "activated:", textTime(e.GetActivatedAt()))
	row(tw, "expires:", textTime(e.GetExpiresAt()))
	if d.GetUnlimited() {
		row(tw, "data total:", "unlimited")
		row(tw, "data used:", bytesText(d.GetUsedBytes()))
		row(tw, "data remaining:", "unlimited")
	} else {
		row(tw, "data total:", bytesText(d.GetTotalBytes()))
		row(tw, "data used:", bytesText(d.GetUsedBytes()))
		row(tw, "data remaining:", bytesText(remainingBytes(d)))
	}
	row(tw, "usage read:", textTime(d.GetUpdatedAt()))
	row(tw, "activation code:", e.GetActivationCode())
	row(tw, "qr code url:", e.GetQrCodeUrl())
	row(tw, "top-ups:", len(e.GetTopups()))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(e.GetTopups()) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	tw = table(c.stdout, "ID", "STATUS", "PLAN", "DAYS", "DATA", "PRICE", "CREATED")
	for _, t := range e.GetTopups() {
		data := "unlimited"
		if !e.GetData().GetUnlimited() {
			data = dataSize(t.GetBytes())
		}
		status := orderStatus(t.GetStatus())
		if er := t.GetError(); er != nil {
			status += " (" + er.GetCode() + ")"
		}
		row(tw, t.GetId(), status, t.GetPlanId(), t.GetDays(), data,
			priceText(t.GetPrice().GetTotalMinor(), t.GetPrice().GetCurrency()), textTime(t.GetCreatedAt()))
	}
	return tw.Flush()
}
