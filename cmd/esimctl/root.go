package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/cmd/internal/operator"
	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	"github.com/esimplatform/esim/proto/limits"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// Exit codes, as scripts (and kubectl, gh) expect them.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// The addresses of `make run`.
const (
	defaultAccountsURL  = "http://127.0.0.1:8081"
	defaultCatalogueURL = "http://127.0.0.1:8082"
	defaultWalletURL    = "http://127.0.0.1:8083"
	defaultOrderingURL  = "http://127.0.0.1:8084"
	defaultWebhookURL   = "http://127.0.0.1:8085"
)

// cli holds what every command shares: where the services are, the output
// mode and the streams. Nothing in it is global, so tests run it in-process.
type cli struct {
	stdout, stderr io.Writer

	accountsURL  string
	catalogueURL string
	walletURL    string
	orderingURL  string
	webhookURL   string
	timeout      time.Duration
	json         bool

	// tokenFile holds the operator credential unless ESIM_OPERATOR_TOKEN
	// does; token and tokenSource are what action found, and where.
	tokenFile   string
	envToken    string
	token       string
	tokenSource string
}

// run executes one esimctl invocation and returns the process exit code:
// 0 on success, 1 when the operation failed, 2 when the command line was
// wrong.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	root := c.rootCommand(getenv)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var f *failure
	if errors.As(err, &f) {
		fmt.Fprintf(stderr, "esimctl: %s\n", f.msg)
		return exitFailure
	}
	// Whatever cobra itself rejects (unknown flags and commands, missing
	// required flags, argument counts) is a usage error, like our own.
	fmt.Fprintf(stderr, "esimctl: %s\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	return exitUsage
}

func (c *cli) rootCommand(getenv func(string) string) *cobra.Command {
	envOr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	root := &cobra.Command{
		Use:   "esimctl",
		Short: "Operate the eSIM platform: partner accounts, API keys, the plan catalogue, balances, orders, eSIMs and webhooks",
		Long: `esimctl operates the eSIM platform over the services' internal APIs.

Service addresses default to those of ` + "`make run`" + ` and can be set with flags or
ESIM_ACCOUNTS_URL, ESIM_CATALOGUE_URL, ESIM_WALLET_URL, ESIM_ORDERING_URL and
ESIM_WEBHOOK_URL.
Every call carries the operator credential: ESIM_OPERATOR_TOKEN, or the file
named by --token-file (ESIM_OPERATOR_TOKEN_FILE), by default
~/.config/esim/operator-token, where ` + "`make run`" + ` writes the token of the
platform it started. With --json every command prints
exactly one JSON object on stdout ({"data": ...}); errors always go to stderr
with a non-zero exit status (1: the operation failed, 2: usage error).

Ids are flags everywhere (--account, --key, --plan, --order, --esim,
--event); a get takes its id alone too ("orders get ID"). A command given
an account reads it from the accounts service first: an unknown one is
"account ID not found". Lists print ID first and CREATED last.
esimctl completion bash|zsh|fish prints a completion script; esimctl
version the build.`,
		Args:          noSubcommand,
		RunE:          missingSubcommand,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	// esimctl's own completion command takes its place, with esimctl's
	// usage errors; cobra's hidden __complete, which the scripts call,
	// stays.
	root.CompletionOptions.DisableDefaultCmd = true
	// --version prints what `esimctl version` does.
	root.Version = thisBuild().Version
	root.SetVersionTemplate(versionText(thisBuild()) + "\n")
	pf := root.PersistentFlags()
	pf.StringVar(&c.accountsURL, "accounts-url", envOr("ESIM_ACCOUNTS_URL", defaultAccountsURL), "accounts service base URL (env ESIM_ACCOUNTS_URL)")
	pf.StringVar(&c.catalogueURL, "catalogue-url", envOr("ESIM_CATALOGUE_URL", defaultCatalogueURL), "catalogue service base URL (env ESIM_CATALOGUE_URL)")
	pf.StringVar(&c.walletURL, "wallet-url", envOr("ESIM_WALLET_URL", defaultWalletURL), "wallet service base URL (env ESIM_WALLET_URL)")
	pf.StringVar(&c.orderingURL, "ordering-url", envOr("ESIM_ORDERING_URL", defaultOrderingURL), "ordering service base URL (env ESIM_ORDERING_URL)")
	pf.StringVar(&c.webhookURL, "webhook-url", envOr("ESIM_WEBHOOK_URL", defaultWebhookURL), "webhook service base URL (env ESIM_WEBHOOK_URL)")
	pf.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up on a service call after this long")
	c.envToken = getenv(operator.TokenEnv)
	pf.StringVar(&c.tokenFile, "token-file", envOr(operator.TokenFileEnv, operator.DefaultTokenFile(getenv)),
		"`file` holding the operator credential, used unless ESIM_OPERATOR_TOKEN is set (env "+operator.TokenFileEnv+")")
	pf.BoolVar(&c.json, "json", false, `print one JSON object on stdout ({"data": ...}) instead of text`)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usagef("%v%s", err, flagSuggestion(cmd, err)) })
	root.AddCommand(c.accountsCommand(), c.keysCommand(), c.plansCommand(), c.walletCommand(), c.ordersCommand(),
		c.esimsCommand(), c.webhooksCommand(), c.eventsCommand(), c.providerCommand(), c.usersCommand(getenv),
		c.versionCommand(), c.completionCommand())
	root.SetHelpCommand(helpCommand())
	completeValues(root)
	return root
}

// helpCommand is cobra's help command, but a topic that names no command
// is a usage error with the nearest names, as the command itself would
// be, rather than esimctl's help and exit 0.
func helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:         "help [command]",
		Short:       "Help about any command",
		Long:        "Help provides help for any command: esimctl help orders list is esimctl orders list --help.",
		Annotations: map[string]string{localAnnotation: "true"},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			target, _, err := cmd.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return subcommandNames(target), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil {
				return usagef("%v", err)
			}
			if len(rest) > 0 {
				return noSubcommand(target, rest)
			}
			return target.Help()
		},
	}
}

// completeValues lets the completion scripts offer the values of the
// flags that take one of a few words, wherever such a flag is.
func completeValues(cmd *cobra.Command) {
	values := map[string][]string{"env": {"sandbox", "live"}, "currency": limits.Currencies}
	for name, words := range values {
		if cmd.LocalNonPersistentFlags().Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	for _, sub := range cmd.Commands() {
		completeValues(sub)
	}
}

// group returns a command that only holds subcommands, all of which call
// service ("accounts", "catalogue", "wallet", "ordering" or "webhook"), or
// the services listed with commas ("accounts,wallet"), in the order they
// call them.
func group(use, short, service string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Args: noSubcommand, RunE: missingSubcommand,
		Annotations: map[string]string{serviceAnnotation: service}}
	g.AddCommand(subs...)
	return g
}

// serviceAnnotation names, on a group, the services its commands call.
const serviceAnnotation = "esimctl.service"

// serviceSetting is where a service is expected, and the flag and
// environment variable that say so.
type serviceSetting struct {
	url            *string
	flag, env, def string
}

// setting is the address setting of service, false for an unknown one.
func (c *cli) setting(service string) (serviceSetting, bool) {
	switch service {
	case "accounts":
		return serviceSetting{&c.accountsURL, "--accounts-url", "ESIM_ACCOUNTS_URL", defaultAccountsURL}, true
	case "catalogue":
		return serviceSetting{&c.catalogueURL, "--catalogue-url", "ESIM_CATALOGUE_URL", defaultCatalogueURL}, true
	case "wallet":
		return serviceSetting{&c.walletURL, "--wallet-url", "ESIM_WALLET_URL", defaultWalletURL}, true
	case "ordering":
		return serviceSetting{&c.orderingURL, "--ordering-url", "ESIM_ORDERING_URL", defaultOrderingURL}, true
	case "webhook":
		return serviceSetting{&c.webhookURL, "--webhook-url", "ESIM_WEBHOOK_URL", defaultWebhookURL}, true
	}
	return serviceSetting{}, false
}

// checkServiceURL checks the base URLs of the services cmd calls, and only
// those: a wrong --catalogue-url must not stop `keys list`. A command that
// calls two services (`wallet topup`: accounts, then wallet) has both
// checked before it calls either.
func (c *cli) checkServiceURL(cmd *cobra.Command) error {
	for g := cmd; g != nil; g = g.Parent() {
		names, ok := g.Annotations[serviceAnnotation]
		if !ok {
			continue
		}
		for name := range strings.SplitSeq(names, ",") {
			if _, ok := c.setting(name); !ok {
				// A programming error, not the operator's: exit 1.
				return &failure{msg: fmt.Sprintf("%s: its group names an unknown service %q", commandPath(cmd), name)}
			}
			if err := c.checkService(name); err != nil {
				return err
			}
		}
		return nil
	}
	// A programming error, not the operator's: exit 1.
	return &failure{msg: commandPath(cmd) + ": no service named for its group"}
}

// checkService checks the base URL of one service, for a command that
// calls it only on some runs (esims list --account reads the account from
// accounts first): before that call, not before every run.
func (c *cli) checkService(name string) error {
	s, ok := c.setting(name)
	if !ok {
		return &failure{msg: fmt.Sprintf("unknown service %q", name)}
	}
	base, err := serviceURL(*s.url, s.flag, s.env, s.def)
	if err != nil {
		return err
	}
	*s.url = base
	return nil
}

// missingSubcommand is what a group (esimctl itself included) does when
// given no subcommand: a usage error naming the subcommands. Printing the
// help and exiting 0 instead would let a script that lost its subcommand
// "succeed" with no JSON on stdout. --help still prints the help.
func missingSubcommand(cmd *cobra.Command, _ []string) error {
	names := subcommandNames(cmd)
	if !cmd.HasParent() {
		return usagef("missing command: %s", orList(names))
	}
	return usagef("%s: missing subcommand: %s", commandPath(cmd), orList(names))
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// noSubcommand turns stray words after a group into a usage error; cobra
// would otherwise print the help and exit 0, which hides typos in scripts.
// A word close to a subcommand's name (a typo, or its first letters) is
// answered with that name.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), didYouMean(args[0], subcommandNames(cmd)))
	}
	return nil
}

// subcommandNames are the subcommands an operator may type after cmd.
func subcommandNames(cmd *cobra.Command) []string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}

// flagSuggestion answers pflag's "unknown flag: --acount" with the flags
// of cmd close to it.
func flagSuggestion(cmd *cobra.Command, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	var names []string
	add := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, "--"+f.Name)
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	// A flag's value follows it with a space or "=": only the name is
	// compared.
	typed, _, _ = strings.Cut(typed, "=")
	return didYouMean("--"+typed, names)
}

// exactArgs is cobra.ExactArgs with the argument names in the message.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == len(names):
			return nil
		case len(names) == 0:
			return usagef("%s takes no arguments, got %q", commandPath(cmd), args)
		case len(names) == 1:
			return usagef("%s takes 1 argument: %s (got %d)", commandPath(cmd), names[0], len(args))
		}
		return usagef("%s takes %d arguments: %s (got %d)", commandPath(cmd), len(names), strings.Join(names, " "), len(args))
	}
}

// idFlag is an id a command takes as --<flag> ID, the way every command
// takes ids, or as its one argument, the way `get` and a few others took
// theirs before the flags and still do: `orders get --order ID` and
// `orders get ID` are the same command.
type idFlag struct {
	flag, arg string
	value     string
}

// addIDFlag gives cmd --flag and lets ARG stand for it; cmd.Args must
// accept at most one argument (idArgs does).
func addIDFlag(cmd *cobra.Command, flag, arg, usage string) *idFlag {
	f := &idFlag{flag: flag, arg: arg}
	cmd.Flags().StringVar(&f.value, flag, "", usage+" `ID` (required; or given alone as "+arg+")")
	return f
}

// idArgs accepts the id's one optional argument.
func idArgs(f *idFlag) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usagef("%s takes at most 1 argument: %s (got %d)", commandPath(cmd), f.arg, len(args))
		}
		return nil
	}
}

// get is the id as given, and how: "--order" or "ORDER_ID", as a message
// about it names it. Given both ways, the two must agree.
func (f *idFlag) get(cmd *cobra.Command, args []string) (raw, name string, err error) {
	flagSet := cmd.Flags().Changed(f.flag)
	switch {
	case flagSet && len(args) == 1 && !strings.EqualFold(args[0], f.value):
		return "", "", usagef("%s: --%s %q and %s %q disagree: give the id once", commandPath(cmd), f.flag, f.value, f.arg, args[0])
	case flagSet:
		return f.value, "--" + f.flag, nil
	case len(args) == 1:
		return args[0], f.arg, nil
	}
	return "", "", usagef("%s: missing --%s ID (or the id alone, as %s)", commandPath(cmd), f.flag, f.arg)
}

// id is get's id, checked as a UUID by parseID.
func (f *idFlag) id(cmd *cobra.Command, args []string) (string, error) {
	raw, name, err := f.get(cmd, args)
	if err != nil {
		return "", err
	}
	return parseID(name, raw)
}

// commandPath is the command as an error message names it: run prefixes
// "esimctl: ", so the path is said without the root ("plans retire").
func commandPath(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// checkName refuses a blank --flag ("" or spaces only) where a name is
// created, before any call: `--name "$N"` with N unset must not make a
// nameless account or key, nor reach the service to be refused there.
// hint says what to give instead.
func checkName(cmd *cobra.Command, flag, value, hint string) error {
	if cmd.Flags().Changed(flag) && strings.TrimSpace(value) == "" {
		return usagef("invalid --%s %q: blank; %s", flag, value, hint)
	}
	return nil
}

// parseID checks an account, key or plan id before any service is called:
// a malformed one is a usage error (exit 2), not an unknown id (exit 1).
// Only the canonical 36-character form is accepted, in either case;
// uuid.Parse also takes braces, a urn:uuid: prefix and no hyphens. The id
// is returned in lower case, as the services print ids. name is the flag
// or argument, as the message names it ("--account", "PLAN_ID").
func parseID(name, s string) (string, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != len(id.String()) {
		return "", usagef("invalid %s %q: not a UUID", name, s)
	}
	return id.String(), nil
}

// usageError is a command line that cannot work: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// failure is an operation that was attempted and failed: exit status 1.
type failure struct{ msg string }

func (e *failure) Error() string { return e.msg }

// action adapts a command body: it bounds the whole command by --timeout and
// keeps usage errors apart from failures.
func (c *cli) action(fn func(ctx context.Context, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if c.timeout <= 0 {
			return usagef("invalid --timeout %s: want a positive duration such as 10s", c.timeout)
		}
		if err := c.checkServiceURL(cmd); err != nil {
			return err
		}
		if err := validText(cmd, args); err != nil {
			return err
		}
		if err := c.operatorToken(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), c.timeout)
		defer cancel()
		err := fn(ctx, cmd, args)
		var u *usageError
		var f *failure
		if err == nil || errors.As(err, &u) || errors.As(err, &f) {
			return err
		}
		return &failure{msg: err.Error()}
	}
}

// validText refuses flag values and arguments that are not UTF-8 text,
// which no name or id is and a protobuf string cannot carry: sent, the
// call would fail inside the client with a marshalling error.
func validText(cmd *cobra.Command, args []string) error {
	var bad error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if bad == nil && !utf8.ValidString(f.Value.String()) {
			bad = usagef("invalid --%s: not UTF-8 text", f.Name)
		}
	})
	for _, a := range args {
		if bad == nil && !utf8.ValidString(a) {
			bad = usagef("invalid argument %q: not UTF-8 text", a)
		}
	}
	return bad
}

// serviceURL checks a service base URL before any call, since Twirp's
// client takes anything: without a scheme the request cannot even be built
// (a usage error here, exit 2), and a trailing slash makes every path
// "//twirp/...", which the services answer with a redirect the client
// refuses to follow (so the slash is dropped).
func serviceURL(raw, flag, env, example string) (string, error) {
	base, err := config.ParseBaseURL(raw)
	if err != nil {
		return "", usagef("invalid %s: %v, such as %s (set by %s or %s)", flag, err, example, flag, env)
	}
	return base, nil
}

// unknownOutcome is what an operator needs after a change that got no
// answer: the service may have carried it out, so whether running the
// command again is safe. Creating is not: a second account, or a second
// key whose secret the first run never printed. A top-up is, but only
// with the reference it was sent with (what ends "with reference
// "REF"", as topupWhat words it): without one, a rerun makes a second.
func unknownOutcome(what string) string {
	switch {
	case strings.HasPrefix(what, "top up "):
		_, ref, _ := strings.Cut(what, " with reference ")
		return "; the top-up may have been made: run it again with --reference " + ref +
			" (safe: one reference tops up at most once), not without it, which would top up again"
	case strings.HasPrefix(what, "create account"):
		return "; the account may have been created: check `esimctl accounts list` before running it again"
	case strings.HasPrefix(what, "create key"):
		return "; a key may have been created: check `esimctl keys list` and revoke one whose secret you did not get"
	case strings.HasPrefix(what, "rotate "):
		// Only one previous secret signs: a second rotation drops, at
		// once, the secret receivers were given 24 hours to move off.
		return "; the secret may have been rotated: check when it was made with `esimctl webhooks show` before running it again, which would rotate it again"
	case strings.HasPrefix(what, "simulate consume"):
		// Consuming again uses more data; the other actions, done
		// already, are refused as out of order.
		return "; the eSIM may have moved: check it with `esimctl esims get` before running it again, which would consume again"
	case strings.HasPrefix(what, "simulate "):
		return "; the eSIM may have moved: running it again is safe (an action done already is refused)"
	case strings.HasPrefix(what, "send a test event"):
		return "; a ping may have been sent: running it again sends another, which is harmless"
	case strings.HasPrefix(what, "revoke "), strings.HasPrefix(what, "retire "), strings.HasPrefix(what, "set "), strings.HasPrefix(what, "import "):
		return "; it may have taken effect: running it again is safe"
	}
	return ""
}

// redactURL is a service URL fit for a message: no password.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}

// operatorToken finds the operator credential every call carries: a usage
// error (exit 2) when there is none, as for a missing flag.
func (c *cli) operatorToken() error {
	if c.envToken != "" {
		c.token, c.tokenSource = c.envToken, operator.TokenEnv
		return nil
	}
	if c.tokenFile == "" {
		return usagef("no operator credential: set %s, or --token-file (%s)", operator.TokenEnv, operator.TokenFileEnv)
	}
	token, err := operator.ReadToken(c.tokenFile)
	if errors.Is(err, operator.ErrNoToken) {
		return usagef("no operator credential: %s does not exist; start the platform with `make run` (it writes the token there), or set %s or --token-file",
			c.tokenFile, operator.TokenEnv)
	}
	if err != nil {
		return usagef("%v", err)
	}
	c.token, c.tokenSource = token, c.tokenFile
	return nil
}

// client is an HTTP client that sends the operator credential.
func (c *cli) client() *http.Client {
	return internalauth.Client(&http.Client{}, c.token)
}

func (c *cli) accounts() accountsv1.Accounts {
	return accountsv1.NewAccountsProtobufClient(c.accountsURL, c.client())
}

func (c *cli) catalogue() cataloguev1.Catalogue {
	return cataloguev1.NewCatalogueProtobufClient(c.catalogueURL, c.client())
}

func (c *cli) wallet() walletv1.Wallet {
	return walletv1.NewWalletProtobufClient(c.walletURL, c.client())
}

func (c *cli) ordering() orderingv1.Ordering {
	return orderingv1.NewOrderingProtobufClient(c.orderingURL, c.client())
}

func (c *cli) webhook() webhookv1.Webhook {
	return webhookv1.NewWebhookProtobufClient(c.webhookURL, c.client())
}

// callFailed words a failed service call for an operator: what was being
// done, then the service's own message, or where the service was expected
// and how to start it when it cannot be reached at all.
func (c *cli) callFailed(what, service string, err error) error {
	s, ok := c.setting(service)
	if !ok {
		s, _ = c.setting("accounts")
	}
	base, flag, env := redactURL(*s.url), s.flag, s.env
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &failure{msg: fmt.Sprintf("%s: no answer from the %s service at %s within %s (--timeout)%s", what, service, base, c.timeout, unknownOutcome(what))}
	case errors.Is(err, context.Canceled):
		return &failure{msg: fmt.Sprintf("%s: interrupted%s", what, unknownOutcome(what))}
	}
	var urlErr *url.Error
	var twerr twirp.Error
	if errors.As(err, &urlErr) {
		// The call failed in the transport. One that was never dialled, or
		// whose TLS handshake failed, was never sent; one cut later may
		// have been carried out.
		var opErr *net.OpError
		var certErr *tls.CertificateVerificationError
		var recordErr tls.RecordHeaderError
		switch {
		case errors.As(err, &opErr) && opErr.Op == "dial":
			return &failure{msg: fmt.Sprintf("%s: cannot reach the %s service at %s (%v); start the platform with `make run` or set %s / %s",
				what, service, base, opErr.Err, flag, env)}
		case errors.Is(err, http.ErrSchemeMismatch), errors.As(err, &certErr), errors.As(err, &recordErr):
			return &failure{msg: fmt.Sprintf("%s: cannot talk to the %s service at %s (%v); nothing was sent; check %s / %s",
				what, service, base, urlErr.Err, flag, env)}
		}
		return &failure{msg: fmt.Sprintf("%s: the call to the %s service at %s failed (%v); check %s / %s%s",
			what, service, base, urlErr.Err, flag, env, unknownOutcome(what))}
	}
	if errors.As(err, &twerr) && twerr.Meta("http_error_from_intermediary") == "" {
		switch twerr.Code() {
		case twirp.Unauthenticated:
			return &failure{msg: fmt.Sprintf("%s: the %s service at %s refused the operator credential from %s (a token of another platform, or of an earlier `make run`?)",
				what, service, base, c.tokenSource)}
		case twirp.PermissionDenied:
			return &failure{msg: fmt.Sprintf("%s: the %s service at %s does not let the credential from %s do this: %s", what, service, base, c.tokenSource, twerr.Msg())}
		}
	}
	if errors.As(err, &twerr) && twerr.Code() == twirp.InvalidArgument {
		// Every argument comes from the command line, so an argument the
		// service refuses is a malformed flag, as one esimctl refuses
		// itself is: a usage error (exit 2), whichever side caught it.
		msg, _ := strings.CutPrefix(twerr.Msg(), what+": ")
		return usagef("%s: %s", what, msg)
	}
	if errors.As(err, &twerr) && (twerr.Meta("http_error_from_intermediary") == "true" || twerr.Code() == twirp.BadRoute) {
		// Not an answer from the service at all: something else listens at
		// that address (the gateway, the other service, a proxy).
		return &failure{msg: fmt.Sprintf("%s: %s does not answer as the %s service (%s); check %s / %s",
			what, base, service, twerr.Msg(), flag, env)}
	}
	if errors.As(err, &twerr) {
		msg := twerr.Msg()
		if msg == "" {
			msg = string(twerr.Code())
		}
		// The accounts service words its errors with what was being done, as
		// we do ("create key for account A: not found"); say it once. Ids
		// are lower-cased by parseID, as the services print them, so the
		// two spell the context alike.
		msg, _ = strings.CutPrefix(msg, what+": ")
		return &failure{msg: fmt.Sprintf("%s: %s", what, msg)}
	}
	return &failure{msg: fmt.Sprintf("%s: %v", what, err)}
}
