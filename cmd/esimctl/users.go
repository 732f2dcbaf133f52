package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// defaultPortalURL is the partner portal under `make run`.
const defaultPortalURL = "http://127.0.0.1:8087"

// inviteView is an invite in --json output: the link carries the one-time
// token, which is shown nowhere else.
type inviteView struct {
	AccountID string  `json:"account_id"`
	Email     string  `json:"email"`
	URL       string  `json:"url"`
	ExpiresAt *string `json:"expires_at"`
}

func (c *cli) usersCommand(getenv func(string) string) *cobra.Command {
	return group("users", "Invite, list and remove the people who sign in to the partner portal", "accounts",
		c.usersInviteCommand(getenv), c.usersListCommand(), c.usersRemoveCommand(), c.usersResetLinkCommand(getenv))
}

func (c *cli) usersInviteCommand(getenv func(string) string) *cobra.Command {
	var account, email, portalURL string
	cmd := &cobra.Command{
		Use:   "invite --account ID --email EMAIL [--portal-url URL]",
		Short: "Print a one-time link with which a person joins an account in the portal",
		Long: `Print a one-time link with which a person chooses a password and joins the
account in the partner portal. Only the link's hash is stored: hand it over
now, over a secure channel; it cannot be shown again, and it expires
(INVITE_TTL of the accounts service, 72h unless configured).

Inviting an email that is already a user of the account resets that user's
password when the link is used (and signs them out everywhere): how to give
someone who lost theirs a new one. An email of another account's user is
refused.`,
		Example: `  esimctl users invite --account 0193... --email ann@acme.example`,
		Args:    exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	cmd.Flags().StringVar(&email, "email", "", "the person's email address (required)")
	addPortalURL(cmd, &portalURL, getenv)
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("email")
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		if err := checkName(cmd, "email", email, "give the person's email address"); err != nil {
			return err
		}
		// Checked before the call: an invite made for a link that cannot
		// be built is a token wasted.
		base, err := serviceURL(portalURL, "--portal-url", "ESIM_PORTAL_URL", defaultPortalURL)
		if err != nil {
			return err
		}
		if _, err := c.requireAccount(ctx, accountID); err != nil {
			return err
		}
		resp, err := c.accounts().InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: accountID, Email: email})
		if err != nil {
			return c.callFailed("invite to account "+accountID, "accounts", err)
		}
		link := base + "/invite/" + resp.GetToken()
		// As the service stores it.
		email := strings.ToLower(strings.TrimSpace(email))
		// On stderr, as for keys create: never in what a script captures.
		fmt.Fprintln(c.stderr, "esimctl: hand this link over now: it works once and cannot be shown again.")
		if c.json {
			return c.printJSON(inviteView{AccountID: accountID, Email: email, URL: link, ExpiresAt: timestamp(resp.GetExpiresAt())}, nil)
		}
		fmt.Fprintf(c.stdout, "invite for %s to account %s, valid until %s:\n%s\n", email, accountID, textTime(resp.GetExpiresAt()), link)
		return nil
	})
	return cmd
}

// addPortalURL adds --portal-url, the base of the links a command prints.
func addPortalURL(cmd *cobra.Command, portalURL *string, getenv func(string) string) {
	def := defaultPortalURL
	if v := getenv("ESIM_PORTAL_URL"); v != "" {
		def = v
	}
	cmd.Flags().StringVar(portalURL, "portal-url", def, "the partner portal's base URL, which the link points at (env ESIM_PORTAL_URL)")
}
