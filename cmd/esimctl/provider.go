package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
)

// providerView is a provider check in --json output.
type providerView struct {
	Environment string `json:"environment"`
	// sandbox, es2plus, or "" when the environment has none.
	Provider string `json:"provider"`
	// For ES2+, the SM-DP+'s URL.
	Target string `json:"target"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func (c *cli) providerCommand() *cobra.Command {
	return group("provider", "Check the providers that issue eSIM profiles", "ordering", c.providerCheckCommand())
}

func (c *cli) providerCheckCommand() *cobra.Command {
	env := "live"
	cmd := &cobra.Command{
		Use:   "check [--env sandbox|live]",
		Short: "Call an environment's provider harmlessly and say whether it answered",
		Long: `Have the ordering service call the provider of an environment harmlessly and
report what it answered. For live with an SM-DP+ configured (SMDP_URL), that is
an ES2+ cancelOrder of an ICCID no SM-DP+ holds, over the configured mutual
TLS: any ES2+ answer, success or refusal, shows that the URL, the
certificates and the protocol work; a TLS, connection or protocol failure is
reported with its cause. Exits 1 when the check fails or live has no provider.`,
		Example: `  esimctl provider check
  esimctl provider check --env sandbox --json`,
		Args: exactArgs(),
	}
	cmd.Flags().StringVar(&env, "env", env, "environment whose provider to check: sandbox or live")
	cmd.RunE = c.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
		environment, err := parseEnv(env)
		if err != nil {
			return err
		}
		res, err := c.ordering().CheckProvider(ctx, &orderingv1.CheckProviderRequest{Environment: environment})
		if err != nil {
			return c.callFailed("check the "+environment.ShortName()+" provider", "ordering", err)
		}
		view := providerView{Environment: environment.ShortName(), Provider: res.GetProvider(), Target: res.GetTarget(), OK: res.GetOk(), Detail: res.GetDetail()}
		switch {
		case view.Provider == "":
			return &failure{msg: fmt.Sprintf("%s has no provider: %s", view.Environment, view.Detail)}
		case !view.OK:
			return &failure{msg: fmt.Sprintf("the %s provider (%s at %s) did not answer: %s", view.Environment, view.Provider, view.Target, view.Detail)}
		case c.json:
			return c.printJSON(view, nil)
		}
		fmt.Fprintf(c.stdout, "%s: the %s provider at %s answered\n  %s\n", view.Environment, view.Provider, view.Target, view.Detail)
		return nil
	})
	return cmd
}
