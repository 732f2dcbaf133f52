package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"net/url"
	"time"

	"github.com/spf13/cobra"
	"github.com/twitchtv/twirp"

	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// endpointView is a scope's webhook endpoint in --json output, its signing
// secret included: set, show and rotate-secret are where an operator gets
// it to hand to the partner.
type endpointView struct {
	AccountID   string `json:"account_id"`
	Environment string `json:"environment"`
	URL         string `json:"url"`
	// whsec_...: what receivers verify each delivery's signature with.
	Secret          string  `json:"secret"`
	SecretCreatedAt *string `json:"secret_created_at"`
	// null unless a rotated-out secret still signs beside the current one.
	PreviousSecretExpiresAt *string `json:"previous_secret_expires_at"`
	UpdatedAt               *string `json:"updated_at"`
}

func viewEndpoint(e *webhookv1.Endpoint) endpointView {
	return endpointView{
		AccountID: e.GetScope().GetAccountId(), Environment: e.GetScope().GetEnvironment().ShortName(),
		URL: e.GetUrl(), Secret: e.GetSecret(), SecretCreatedAt: timestamp(e.GetSecretCreatedAt()),
		PreviousSecretExpiresAt: timestamp(e.GetPreviousSecretExpiresAt()), UpdatedAt: timestamp(e.GetUpdatedAt()),
	}
}

// sendTestWait bounds send-test --wait: long enough for every attempt to
// a receiver that answers (retries follow within seconds), short enough
// for a terminal. One that lets attempts time out takes longer; events
// get follows it.
const sendTestWait = 15 * time.Second

// overlapText is how long a rotated-out secret keeps signing, as help
// says it: "24 hours".
var overlapText = fmt.Sprintf("%d hours", int(limits.SecretOverlap.Hours()))

// deliveryPollInterval is how often --wait reads the event again.
const deliveryPollInterval = 250 * time.Millisecond

// secretNotice goes to stderr, as keys create's does: never in what a
// script captures, always before an operator at a terminal.
const secretNotice = "esimctl: the output holds the signing secret: keep it secret; receivers verify with it."

func (c *cli) webhooksCommand() *cobra.Command {
	// Every webhooks command reads the account first: the webhook service
	// keeps no accounts, so it would take a URL for any id.
	return group("webhooks", "Set partners' webhook URLs, show and rotate their signing secrets, send test events", "accounts,webhook",
		c.webhooksSetCommand(), c.webhooksShowCommand(), c.webhooksRotateSecretCommand(), c.webhooksSendTestCommand(),
		c.webhooksListenCommand())
}

// webhookScopeFlags are the flags that name a webhook endpoint: --account
// and --env, both required.
func webhookScopeFlags(cmd *cobra.Command, account, env *string) {
	cmd.Flags().StringVar(account, "account", "", "the account's `ID` (required)")
	cmd.Flags().StringVar(env, "env", "", "environment of the webhook URL: sandbox or live (required)")
	_ = cmd.MarkFlagRequired("account")
	_ = cmd.MarkFlagRequired("env")
}

// parseWebhookScope checks --account and --env before any call.
func parseWebhookScope(account, env string) (*webhookv1.Scope, error) {
	accountID, environment, err := parseAccountEnv(account, env)
	if err != nil {
		return nil, err
	}
	return &webhookv1.Scope{AccountId: accountID, Environment: environment}, nil
}

// scopeText is a scope as messages name it: "account A in sandbox".
func scopeText(s *webhookv1.Scope) string {
	return fmt.Sprintf("account %s in %s", s.GetAccountId(), s.GetEnvironment().ShortName())
}

// parseWebhookURL checks only that --url is an absolute http(s) URL, which
// a malformed one (no scheme, no host) is not: a usage error before any
// call. Which URLs may receive deliveries (https only in live, no private
// addresses) is the service's rule, and its refusal is shown as it words it.
func parseWebhookURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.Hostname() == "" {
		return "", usagef("invalid --url %q: want an absolute http:// or https:// URL, such as https://partner.example/webhooks/esim", raw)
	}
	return raw, nil
}

// isNotFound is the webhook service's own not_found, not a proxy's 404.
func isNotFound(err error) bool {
	twerr, ok := errors.AsType[twirp.Error](err)
	return ok && twerr.Code() == twirp.NotFound && twerr.Meta("http_error_from_intermediary") == ""
}

// noEndpoint is what show, rotate-secret and send-test say while the
// scope has no URL: the service's not_found, and the command that fixes it.
func noEndpoint(s *webhookv1.Scope, why string) error {
	return &failure{msg: fmt.Sprintf("no webhook URL set for %s%s; set one with `esimctl webhooks set --account %s --env %s --url URL`",
		scopeText(s), why, s.GetAccountId(), s.GetEnvironment().ShortName())}
}

func (c *cli) webhooksSetCommand() *cobra.Command {
	var account, env, rawURL string
	cmd := &cobra.Command{
		Use:   "set --account ID --env sandbox|live --url URL",
		Short: "Set the URL an account's events are delivered to, and print its signing secret",
		Long: `Set the URL a partner's sandbox or live webhook events (order.completed,
order.failed, ping) are delivered to, replacing any earlier one. The first
URL of an account and environment makes its signing secret (whsec_...);
setting another URL keeps it. The secret is printed: keep it secret;
receivers verify with it. esimctl webhooks show prints it again.

A live URL must be https; the webhook service refuses any other, and the URLs
it does not deliver to, with its reason (exit 1; nothing is stored).`,
		Example: `  esimctl webhooks set --account 0193... --env sandbox --url https://partner.example/webhooks/esim
  esimctl webhooks set --account 0193... --env live --url https://partner.example/webhooks/esim --json | jq -r .data.secret`,
		Args: exactArgs(),
	}
	webhookScopeFlags(cmd, &account, &env)
	cmd.Flags().StringVar(&rawURL, "url", "", "absolute http:// or https:// URL to deliver to; https in live (required)")
	_ = cmd.MarkFlagRequired("url")
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		scope, err := parseWebhookScope(account, env)
		if err != nil {
			return err
		}
		target, err := parseWebhookURL(rawURL)
		if err != nil {
			return err
		}
		if _, err := c.requireAccount(ctx, scope.GetAccountId()); err != nil {
			return err
		}
		what := fmt.Sprintf("set the %s webhook URL of account %s", scope.GetEnvironment().ShortName(), scope.GetAccountId())
		e, err := c.webhook().SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: target})
		if twerr, ok := errors.AsType[twirp.Error](err); ok && twerr.Code() == twirp.InvalidArgument &&
			twerr.Meta("http_error_from_intermediary") == "" && twerr.Meta("argument") == "url" {
			// The URL is well formed (checked above); the service will not
			// deliver to it. That is a refusal of this URL, not a
			// malformed command line: exit 1, in the service's words
			// (its reason alone: the message repeats the field, "url: ").
			reason := twerr.Meta("reason")
			if reason == "" {
				reason = twerr.Msg()
			}
			return &failure{msg: fmt.Sprintf("%s: the webhook service refused %s: %s; nothing was stored", what, target, reason)}
		}
		if err != nil {
			return c.callFailed(what, "webhook", err)
		}
		fmt.Fprintln(c.stderr, secretNotice)
		if c.json {
			return c.printJSON(viewEndpoint(e), nil)
		}
		fmt.Fprintf(c.stdout, "the %s events of account %s are delivered to %s\n",
			e.GetScope().GetEnvironment().ShortName(), e.GetScope().GetAccountId(), e.GetUrl())
		return c.printEndpoint(e)
	})
	return cmd
}

// printEndpoint writes an endpoint for a human, secret included.
func (c *cli) printEndpoint(e *webhookv1.Endpoint) error {
	tw := table(c.stdout)
	row(tw, "account:", e.GetScope().GetAccountId())
	row(tw, "environment:", e.GetScope().GetEnvironment().ShortName())
	row(tw, "url:", e.GetUrl())
	row(tw, "secret:", e.GetSecret())
	row(tw, "secret created:", textTime(e.GetSecretCreatedAt()))
	row(tw, "previous secret:", previousSecretText(e))
	row(tw, "updated:", textTime(e.GetUpdatedAt()))
	return tw.Flush()
}

// previousSecretText says whether a rotated-out secret still signs.
func previousSecretText(e *webhookv1.Endpoint) string {
	if e.GetPreviousSecretExpiresAt() == nil {
		return "none"
	}
	return "still signs until " + textTime(e.GetPreviousSecretExpiresAt())
}

func (c *cli) webhooksShowCommand() *cobra.Command {
	var account, env string
	cmd := &cobra.Command{
		Use:   "show --account ID --env sandbox|live",
		Short: "Show an account's webhook URL and signing secret",
		Long: `Show a partner's sandbox or live webhook URL, its signing secret and when the
secret was made, and, during a rotation, until when the previous secret
still signs beside it.`,
		Example: `  esimctl webhooks show --account 0193... --env sandbox
  esimctl webhooks show --account 0193... --env live --json | jq -r .data.secret`,
		Args: exactArgs(),
	}
	webhookScopeFlags(cmd, &account, &env)
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		scope, err := parseWebhookScope(account, env)
		if err != nil {
			return err
		}
		if _, err := c.requireAccount(ctx, scope.GetAccountId()); err != nil {
			return err
		}
		e, err := c.webhook().GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope})
		if isNotFound(err) {
			return noEndpoint(scope, "")
		}
		if err != nil {
			return c.callFailed(fmt.Sprintf("get the %s webhook URL of account %s", scope.GetEnvironment().ShortName(), scope.GetAccountId()), "webhook", err)
		}
		if c.json {
			return c.printJSON(viewEndpoint(e), nil)
		}
		return c.printEndpoint(e)
	})
	return cmd
}

func (c *cli) webhooksRotateSecretCommand() *cobra.Command {
	var account, env string
	cmd := &cobra.Command{
		Use:   "rotate-secret --account ID --env sandbox|live",
		Short: "Make a new signing secret; the old one keeps signing beside it for " + overlapText,
		Long: fmt.Sprintf(`Make a new signing secret for a partner's sandbox or live webhooks and print
it. For %s every delivery is signed with both, so receivers can switch
to the new secret without missing a delivery; then only the new one signs.
Only one previous secret signs: rotating again within that time stops the
one before at once.`, overlapText),
		Example: `  esimctl webhooks rotate-secret --account 0193... --env live`,
		Args:    exactArgs(),
	}
	webhookScopeFlags(cmd, &account, &env)
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		scope, err := parseWebhookScope(account, env)
		if err != nil {
			return err
		}
		if _, err := c.requireAccount(ctx, scope.GetAccountId()); err != nil {
			return err
		}
		e, err := c.webhook().RotateSecret(ctx, &webhookv1.RotateSecretRequest{Scope: scope})
		if isNotFound(err) {
			return noEndpoint(scope, ", so no secret to rotate")
		}
		if err != nil {
			return c.callFailed(fmt.Sprintf("rotate the %s webhook secret of account %s", scope.GetEnvironment().ShortName(), scope.GetAccountId()), "webhook", err)
		}
		fmt.Fprintln(c.stderr, secretNotice)
		if c.json {
			return c.printJSON(viewEndpoint(e), nil)
		}
		fmt.Fprintf(c.stdout, "rotated the %s webhook secret of account %s\n", e.GetScope().GetEnvironment().ShortName(), e.GetScope().GetAccountId())
		if err := c.printEndpoint(e); err != nil {
			return err
		}
		if e.GetPreviousSecretExpiresAt() != nil {
			fmt.Fprintf(c.stdout, "the previous secret keeps signing beside the new one until %s: switch receivers to the new one before then\n",
				textTime(e.GetPreviousSecretExpiresAt()))
		}
		return nil
	})
	return cmd
}

func (c *cli) webhooksSendTestCommand() *cobra.Command {
	var account, env string
	var wait bool
	cmd := &cobra.Command{
		Use:   "send-test --account ID --env sandbox|live [--wait]",
		Short: "Send a ping event to an account's webhook URL",
		Long: fmt.Sprintf(`Record a ping event for a partner's sandbox or live webhook URL. It is
delivered like any other event (the same queue, signature and attempts),
right after: esimctl events get shows its attempts.

With --wait, esimctl follows the delivery for up to %s (each call still
bounded by --timeout) and prints the attempts: exit 0 once delivered, exit 1
when it failed or is still pending by then.`, sendTestWait),
		Example: `  esimctl webhooks send-test --account 0193... --env sandbox
  esimctl webhooks send-test --account 0193... --env live --wait`,
		Args: exactArgs(),
	}
	webhookScopeFlags(cmd, &account, &env)
	cmd.Flags().BoolVar(&wait, "wait", false, fmt.Sprintf("follow the delivery for up to %s and print its attempts", sendTestWait))
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		scope, err := parseWebhookScope(account, env)
		if err != nil {
			return err
		}
		if _, err := c.requireAccount(ctx, scope.GetAccountId()); err != nil {
			return err
		}
		e, err := c.webhook().SendTestEvent(ctx, &webhookv1.SendTestEventRequest{Scope: scope})
		if isNotFound(err) {
			return noEndpoint(scope, " to send a test event to")
		}
		if err != nil {
			return c.callFailed(fmt.Sprintf("send a test event to the %s webhook URL of account %s", scope.GetEnvironment().ShortName(), scope.GetAccountId()), "webhook", err)
		}
		if wait {
			// Not ctx: --timeout bounds each call, and a delivery takes
			// longer than one.
			return c.awaitDelivery(cmd.Context(), e)
		}
		if c.json {
			return c.printJSON(viewEvent(e), nil)
		}
		fmt.Fprintf(c.stdout, "sent ping %s for %s; its delivery to %s follows\n", e.GetId(), scopeText(e.GetScope()), e.GetUrl())
		fmt.Fprintf(c.stdout, "watch it with `esimctl events get --event %s` or `esimctl events list --account %s --env %s --type ping`\n",
			e.GetId(), e.GetScope().GetAccountId(), e.GetScope().GetEnvironment().ShortName())
		return nil
	})
	return cmd
}

// awaitDelivery reads a just-sent event until its delivery is settled or
// sendTestWait has passed, then prints it; undelivered is a failure, so a
// script can use send-test --wait as a check of the partner's receiver.
func (c *cli) awaitDelivery(ctx context.Context, sent *webhookv1.Event) error {
	deadline := time.Now().Add(sendTestWait)
	e := sent
	for e.GetStatus() == webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return &failure{msg: fmt.Sprintf("wait for the delivery of ping %s: interrupted; `esimctl events get --event %s` shows where it stands", sent.GetId(), sent.GetId())}
		case <-time.After(deliveryPollInterval):
		}
		callCtx, cancel := context.WithTimeout(ctx, c.timeout)
		next, err := c.webhook().GetEvent(callCtx, &webhookv1.GetEventRequest{Id: sent.GetId()})
		cancel()
		if err != nil {
			return c.callFailed("follow the delivery of ping "+sent.GetId(), "webhook", err)
		}
		e = next
	}
	switch e.GetStatus() {
	case webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED:
		if c.json {
			return c.printJSON(viewEventDetail(e), nil)
		}
		fmt.Fprintf(c.stdout, "delivered ping %s to %s\n", e.GetId(), e.GetUrl())
		return c.printAttempts(e.GetAttempts(), false)
	case webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING:
		return &failure{msg: fmt.Sprintf("ping %s is still pending after %s (%s); the service keeps trying: `esimctl events get --event %s` shows where it stands",
			e.GetId(), sendTestWait, attemptsSummary(e.GetAttempts()), e.GetId())}
	}
	return &failure{msg: fmt.Sprintf("ping %s was not delivered: %s (%s); `esimctl events get --event %s` shows every attempt",
		e.GetId(), deliveryStatus(e.GetStatus()), attemptsSummary(e.GetAttempts()), e.GetId())}
}

// attemptsSummary words an event's attempts for a one-line message.
func attemptsSummary(attempts []*webhookv1.Attempt) string {
	switch len(attempts) {
	case 0:
		return "no attempt yet"
	case 1:
		return "1 attempt: " + attemptOutcome(attempts[0])
	}
	return fmt.Sprintf("%d attempts, the last: %s", len(attempts), attemptOutcome(attempts[len(attempts)-1]))
}
