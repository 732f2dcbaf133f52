package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
)

// userView is a portal user in --json output.
type userView struct {
	ID        string  `json:"id"`
	Email     string  `json:"email"`
	AccountID string  `json:"account_id"`
	CreatedAt *string `json:"created_at"`
}

func viewUser(u *accountsv1.User) userView {
	return userView{ID: u.GetId(), Email: u.GetEmail(), AccountID: u.GetAccountId(), CreatedAt: timestamp(u.GetCreatedAt())}
}

// resetView is a password reset in --json output: the link carries the
// one-time token, shown nowhere else.
type resetView struct {
	UserID    string  `json:"user_id"`
	AccountID string  `json:"account_id"`
	Email     string  `json:"email"`
	URL       string  `json:"url"`
	ExpiresAt *string `json:"expires_at"`
}

func (c *cli) usersListCommand() *cobra.Command {
	var account string
	cmd := &cobra.Command{
		Use:   "list --account ID",
		Short: "List the people who sign in to an account in the portal, oldest first",
		Args:  exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	_ = cmd.MarkFlagRequired("account")
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		resp, err := c.accounts().ListUsers(ctx, &accountsv1.ListUsersRequest{AccountId: accountID})
		if isNotFound(err) {
			return accountNotFound(accountID)
		}
		if err != nil {
			return c.callFailed("list users of account "+accountID, "accounts", err)
		}
		users := resp.GetUsers()
		if c.json {
			views := make([]userView, 0, len(users))
			for _, u := range users {
				views = append(views, viewUser(u))
			}
			return c.printJSON(views, nil)
		}
		if len(users) == 0 {
			fmt.Fprintf(c.stdout, "account %s has no portal users (esimctl users invite --account %s --email EMAIL)\n", accountID, accountID)
			return nil
		}
		rows := make([][]any, 0, len(users))
		for _, u := range users {
			rows = append(rows, []any{u.GetId(), u.GetEmail(), textTime(u.GetCreatedAt())})
		}
		n := int32(len(users))
		return c.printList(1, n, n, "users", []any{"ID", "EMAIL", "CREATED"}, rows)
	})
	return cmd
}

func (c *cli) usersRemoveCommand() *cobra.Command {
	var account, user string
	cmd := &cobra.Command{
		Use:   "remove --account ID --user USER_ID",
		Short: "Remove a person from an account; their portal sessions end at once",
		Long: `Remove a person from an account: they can no longer sign in to the portal,
and every session they have ends at once. The account's last user cannot be
removed (invite someone else first). The email may be invited again later.`,
		Example: `  esimctl users remove --account 0193... --user 0194...`,
		Args:    exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "the account's `ID` (required)")
	cmd.Flags().StringVar(&user, "user", "", "the user's `ID`, as users list shows it (required)")
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("user")
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		accountID, err := parseID("--account", account)
		if err != nil {
			return err
		}
		userID, err := parseID("--user", user)
		if err != nil {
			return err
		}
		// The service's not_found is the user's or the account's alike.
		if _, err := c.requireAccount(ctx, accountID); err != nil {
			return err
		}
		_, err = c.accounts().RemoveUser(ctx, &accountsv1.RemoveUserRequest{AccountId: accountID, UserId: userID})
		if isNotFound(err) {
			return &failure{msg: fmt.Sprintf("user %s not found in account %s; `esimctl users list --account %s` shows its users", userID, accountID, accountID)}
		}
		if err != nil {
			return c.callFailed("remove user "+userID+" of account "+accountID, "accounts", err)
		}
		if c.json {
			return c.printJSON(map[string]string{"id": userID, "account_id": accountID}, nil)
		}
		fmt.Fprintf(c.stdout, "removed user %s from account %s; their sessions have ended\n", userID, accountID)
		return nil
	})
	return cmd
}

func (c *cli) usersResetLinkCommand(getenv func(string) string) *cobra.Command {
	var email, portalURL string
	cmd := &cobra.Command{
		Use:   "reset-link --email EMAIL [--portal-url URL]",
		Short: "Print a one-time link with which a person chooses a new portal password",
		Long: `Print a one-time link with which a person who lost their password chooses a
new one in the partner portal; using it signs them out everywhere else. Only
the link's hash is stored: hand it over now, to that person, over a secure
channel; it cannot be shown again, and it expires after 24 hours. Check who
is asking first: the link signs in whoever holds it.`,
		Example: `  esimctl users reset-link --email ann@acme.example`,
		Args:    exactArgs(),
	}
	cmd.Flags().StringVar(&email, "email", "", "the person's email address (required)")
	addPortalURL(cmd, &portalURL, getenv)
	_ = cmd.MarkFlagRequired("email")
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if err := checkName(cmd, "email", email, "give the person's email address"); err != nil {
			return err
		}
		base, err := serviceURL(portalURL, "--portal-url", "ESIM_PORTAL_URL", defaultPortalURL)
		if err != nil {
			return err
		}
		shown := strings.ToLower(strings.TrimSpace(email))
		resp, err := c.accounts().CreatePasswordReset(ctx, &accountsv1.CreatePasswordResetRequest{Email: email})
		if isNotFound(err) {
			return &failure{msg: fmt.Sprintf("no portal user has the email %s", shown)}
		}
		if err != nil {
			return c.callFailed("password reset for "+shown, "accounts", err)
		}
		link := base + "/reset/" + resp.GetToken()
		u := resp.GetUser()
		fmt.Fprintln(c.stderr, "esimctl: hand this link over now, to that person only: it works once and cannot be shown again.")
		if c.json {
			return c.printJSON(resetView{UserID: u.GetId(), AccountID: u.GetAccountId(), Email: u.GetEmail(), URL: link, ExpiresAt: timestamp(resp.GetExpiresAt())}, nil)
		}
		fmt.Fprintf(c.stdout, "password reset for %s (user %s of account %s), valid until %s:\n%s\n", u.GetEmail(), u.GetId(), u.GetAccountId(), textTime(resp.GetExpiresAt()), link)
		return nil
	})
	return cmd
}

// liveRequestView is a request for live in --json output.
type liveRequestView struct {
	AccountID   string  `json:"account_id"`
	Name        string  `json:"name"`
	RequestedBy string  `json:"requested_by"`
	RequestedAt *string `json:"requested_at"`
}

func (c *cli) accountsRequestsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "requests",
		Short: "List the portal's requests for live not yet granted, oldest first",
		Long: `List the accounts whose users asked for live in the portal and do not have
it yet, oldest request first. Grant one with esimctl accounts enable-live
--account ID; it then leaves this list.`,
		Args: exactArgs(),
	}
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		resp, err := c.accounts().ListLiveRequests(ctx, &accountsv1.ListLiveRequestsRequest{})
		if err != nil {
			return c.callFailed("list live requests", "accounts", err)
		}
		reqs := resp.GetRequests()
		if c.json {
			views := make([]liveRequestView, 0, len(reqs))
			for _, r := range reqs {
				views = append(views, liveRequestView{AccountID: r.GetAccount().GetId(), Name: r.GetAccount().GetName(), RequestedBy: r.GetRequestedBy(), RequestedAt: timestamp(r.GetRequestedAt())})
			}
			return c.printJSON(views, nil)
		}
		if len(reqs) == 0 {
			fmt.Fprintln(c.stdout, "no requests for live are waiting")
			return nil
		}
		rows := make([][]any, 0, len(reqs))
		for _, r := range reqs {
			rows = append(rows, []any{r.GetAccount().GetId(), r.GetAccount().GetName(), r.GetRequestedBy(), textTime(r.GetRequestedAt())})
		}
		n := int32(len(reqs))
		if err := c.printList(1, n, n, "requests", []any{"ACCOUNT ID", "NAME", "REQUESTED BY", "REQUESTED AT"}, rows); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, "grant one with: esimctl accounts enable-live --account ID")
		return nil
	})
	return cmd
}
