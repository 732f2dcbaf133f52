package main

import (
	"context"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"strings"

	"github.com/spf13/cobra"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// keyView is an API key in --json output. It never carries the secret: the
// secret exists only in the answer to keys create.
type keyView struct {
	ID          string  `json:"id"`
	AccountID   string  `json:"account_id"`
	Environment string  `json:"environment"`
	Prefix      string  `json:"prefix"`
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	CreatedAt   *string `json:"created_at"`
	RevokedAt   *string `json:"revoked_at"`
}

type createdKeyView struct {
	keyView
	Secret string `json:"secret"`
}

func viewKey(k *accountsv1.ApiKey) keyView {
	status := "active"
	if k.GetRevokedAt() != nil {
		status = "revoked"
	}
	return keyView{
		ID: k.GetId(), AccountID: k.GetAccountId(), Environment: k.GetEnvironment().ShortName(),
		Prefix: k.GetPrefix(), Name: k.GetName(), Status: status,
		CreatedAt: timestamp(k.GetCreatedAt()), RevokedAt: timestamp(k.GetRevokedAt()),
	}
}

func parseEnv(s string) (accountsv1.Environment, error) {
	if e, ok := accountsv1.EnvironmentByShortName(strings.TrimSpace(s)); ok {
		return e, nil
	}
	return 0, usagef("invalid --env %q: want sandbox or live", s)
}

func (c *cli) keysCommand() *cobra.Command {
	return group("keys", "Create, list and revoke partners' API keys", "accounts",
		c.keysCreateCommand(), c.keysListCommand(), c.keysRevokeCommand())
}

func (c *cli) keysCreateCommand() *cobra.Command {
	var account, env, name string
	cmd := &cobra.Command{
		Use:   "create --account ID --env sandbox|live [--name NAME]",
		Short: "Create an API key and print its secret once",
		Long: `Create an API key. The secret is printed once and only its hash is stored:
hand it to the partner over a secure channel now; it cannot be shown again.`,
		Example: `  esimctl keys create --account 0193... --env sandbox --name "staging server"`,
		Args:    exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	cmd.Flags().StringVar(&env, "env", "", "environment the key runs in: sandbox or live (required)")
	cmd.Flags().StringVar(&name, "name", "", "a label to recognise the key by")
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("env")
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		environment, err := parseEnv(env)
		if err != nil {
			return err
		}
		if err := checkName(cmd, "name", name, "leave --name out for a key without a label"); err != nil {
			return err
		}
		resp, err := c.accounts().CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: accountID, Environment: environment, Name: name})
		if isNotFound(err) {
			return accountNotFound(accountID)
		}
		if err != nil {
			return c.callFailed("create key for account "+accountID, "accounts", err)
		}
		// On stderr so it never pollutes what a script captures, yet an
		// operator at a terminal always sees it.
		fmt.Fprintln(c.stderr, "esimctl: store this secret now: it is shown only once and cannot be recovered.")
		if c.json {
			return c.printJSON(createdKeyView{keyView: viewKey(resp.GetKey()), Secret: resp.GetSecret()}, nil)
		}
		k := resp.GetKey()
		fmt.Fprintf(c.stdout, "created %s key %s (%s) for account %s\n", k.GetEnvironment().ShortName(), k.GetId(), k.GetPrefix(), k.GetAccountId())
		fmt.Fprintf(c.stdout, "secret: %s\n", resp.GetSecret())
		return nil
	})
	return cmd
}

func (c *cli) keysListCommand() *cobra.Command {
	var account string
	var page, limit int32
	cmd := &cobra.Command{
		Use:   "list --account ID [--page N] [--limit N]",
		Short: "List an account's API keys, newest first (prefixes only, never secrets)",
		Long: fmt.Sprintf(`List an account's API keys, newest first, revoked ones included. Prefixes
only: a secret is shown once, when its key is created. A page holds %d keys
unless --limit says otherwise.`, limits.MaxPageLimit),
		Args: exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	_ = cmd.MarkFlagRequired("account")
	addPaging(cmd, &page, &limit, limits.MaxPageLimit)
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		if err := checkPaging(page, limit); err != nil {
			return err
		}
		resp, err := c.accounts().ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: accountID, Page: page, Limit: limit})
		if isNotFound(err) {
			return accountNotFound(accountID)
		}
		if err != nil {
			return c.callFailed("list keys of account "+accountID, "accounts", err)
		}
		if c.json {
			views := make([]keyView, 0, len(resp.GetKeys()))
			for _, k := range resp.GetKeys() {
				views = append(views, viewKey(k))
			}
			return c.printJSON(views, newPagination(page, limit, resp.GetTotal()))
		}
		if resp.GetTotal() == 0 && len(resp.GetKeys()) == 0 {
			fmt.Fprintf(c.stdout, "account %s has no API keys\n", accountID)
			return nil
		}
		rows := make([][]any, 0, len(resp.GetKeys()))
		for _, k := range resp.GetKeys() {
			v := viewKey(k)
			rows = append(rows, []any{v.ID, orDash(v.Name), v.Status, v.Environment, v.Prefix, textTime(k.GetRevokedAt()), textTime(k.GetCreatedAt())})
		}
		return c.printList(page, limit, resp.GetTotal(), "keys", []any{"ID", "NAME", "STATUS", "ENV", "PREFIX", "REVOKED", "CREATED"}, rows)
	})
	return cmd
}

func (c *cli) keysRevokeCommand() *cobra.Command {
	var account, key string
	cmd := &cobra.Command{
		Use:   "revoke --account ID --key KEY_ID",
		Short: "Revoke an API key (the gateway stops accepting it within seconds)",
		Args:  exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	cmd.Flags().StringVar(&key, "key", "", "the key's `ID`, as keys list shows it (required)")
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("key")
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		keyID, err := parseID("--key", key)
		if err != nil {
			return err
		}
		// The service's not_found is the key's or the account's alike.
		if _, err := c.requireAccount(ctx, accountID); err != nil {
			return err
		}
		k, err := c.accounts().RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: accountID, KeyId: keyID})
		if err != nil {
			return c.callFailed("revoke key "+keyID+" of account "+accountID, "accounts", err)
		}
		if c.json {
			return c.printJSON(viewKey(k), nil)
		}
		fmt.Fprintf(c.stdout, "revoked %s key %s (%s) at %s\n", k.GetEnvironment().ShortName(), k.GetId(), k.GetPrefix(), textTime(k.GetRevokedAt()))
		return nil
	})
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
