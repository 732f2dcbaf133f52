// Command platform is `make run`: the whole eSIM platform on loopback, with
// a demo partner and a fresh sandbox key, until Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/esimplatform/esim/cmd/internal/operator"
	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/libs/money"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "platform:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	// 1. Flags, with the environment as fallback so `PG_URL=... make run`
	// works without editing the Makefile.
	envOr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("platform", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var opts platform.Options
	fs.StringVar(&opts.PGURL, "pg-url", envOr("PG_URL", platform.DefaultPGURL), "Postgres server `URL` (env PG_URL); the services' databases are created on it")
	fs.StringVar(&opts.RedisURL, "redis-url", envOr("REDIS_URL", platform.DefaultRedisURL), "Redis `URL` (env REDIS_URL)")
	fs.Func("kafka-brokers", "Kafka bootstrap `host:port,...` (env KAFKA_BROKERS); unset embeds a broker", func(v string) error {
		opts.KafkaBrokers = strings.Split(v, ",")
		return nil
	})
	if v := getenv("KAFKA_BROKERS"); v != "" {
		opts.KafkaBrokers = strings.Split(v, ",")
	}
	opts.Addrs = map[string]string{}
	fs.Func("addr", "`service=host:port`: where a service listens instead of its port in services.yaml (repeatable)", func(v string) error {
		name, addr, ok := strings.Cut(v, "=")
		if !ok || name == "" || addr == "" {
			return fmt.Errorf("want service=host:port, such as gateway=127.0.0.1:9080")
		}
		opts.Addrs[name] = addr
		return nil
	})
	fs.StringVar(&opts.RunDir, "run-dir", ".run", "`directory` for logs/<service>.log")
	fs.StringVar(&opts.DatabasePrefix, "db-prefix", "esim_", "`prefix` of the services' database names (<prefix>accounts, <prefix>catalogue)")
	fs.StringVar(&opts.KeyName, "key-name", platform.DefaultKeyName, "`name` of the sandbox key minted at start; earlier active keys of that name are revoked")
	fs.StringVar(&opts.BinDir, "bin-dir", "", "`directory` of the service binaries (default: next to this executable)")
	fs.StringVar(&opts.KeysDir, "keys-dir", operator.DefaultKeysDir(getenv),
		"`directory` keeping the keys of what the databases hold sealed (the webhook service's SECRETS_KEY), made on first use")
	fs.StringVar(&opts.OperatorTokenFile, "operator-token-file", envOr(operator.TokenFileEnv, operator.DefaultTokenFile(getenv)),
		"`file` to write this start's operator credential to, where esimctl reads it (env "+operator.TokenFileEnv+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see -help)", fs.Args())
	}
	opts.Progress = stdout

	// 2. Start everything; Start cleans up after itself on failure.
	p, err := platform.Start(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C during start is a request, not a failure.
			fmt.Fprintln(stdout, "==> interrupted; stopped")
			return nil
		}
		return err
	}

	// 3. Tell the developer what is where.
	printSummary(stdout, p, operator.DefaultTokenFile(getenv))

	// 4. Stay up until asked to stop or until a service dies.
	var exitErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "\n==> stopping")
	case exitErr = <-p.Exited():
		fmt.Fprintln(stdout, "\n==> a service stopped; stopping the others")
	}

	// 5. Stop with a fresh context: ctx is already cancelled.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := p.Stop(stopCtx); err != nil {
		exitErr = errors.Join(exitErr, err)
	}
	if exitErr == nil {
		fmt.Fprintln(stdout, "==> stopped")
	}
	return exitErr
}

func printSummary(w io.Writer, p *platform.Platform, defaultTokenFile string) {
	fmt.Fprintf(w, "\nThe eSIM platform is running.\n\n")
	fmt.Fprintf(w, "  API base URL:  %s\n", p.APIBaseURL)
	fmt.Fprintf(w, "  OpenAPI:       %s/openapi.json\n", p.APIBaseURL)
	for _, s := range p.Services() {
		fmt.Fprintf(w, "  %-14s %s (pid %d)\n", s.Name+":", s.URL, s.PID)
	}
	fmt.Fprintf(w, "  kafka:         %s\n", strings.Join(p.KafkaBrokers, ","))
	fmt.Fprintf(w, "  operator token: %s (esimctl reads it)\n", p.OperatorTokenFile)
	fmt.Fprintf(w, "  demo account:  %s (USD, sandbox balance %s, live balance %s)\n", p.DemoAccountID, money.Decimal(p.DemoBalance), money.Decimal(p.DemoLiveBalance))
	fmt.Fprintf(w, "  logs:          %s/<service>.log\n\n", p.LogDir)
	// Kept exactly in this form: scripts and docs grep for it.
	if p.PortalURL != "" {
		fmt.Fprintf(w, "portal: %s (sign in as %s, password %s)\n", p.PortalURL, platform.DemoPortalEmail, p.DemoPortalPassword)
	}
	fmt.Fprintf(w, "sandbox key: %s\n", p.SandboxKey)
	if p.LiveKey != "" {
		fmt.Fprintf(w, "live key: %s\n", p.LiveKey)
	}
	fmt.Fprintf(w, "\nKeys are shown once; every start prints new ones and revokes the previous.\n")
	if sim := p.URL(platform.SMDPSim); sim != "" {
		fmt.Fprintf(w, "Live orders go to the SM-DP+ simulator over ES2+ with mutual TLS; its control API\n")
		fmt.Fprintf(w, "makes it fail, hang or run dry (README, \"Live provisioning\") with this start's token:\n\n")
		auth := "-H 'Authorization: Bearer " + p.Secret(platform.SMDPSim, "CONTROL_TOKEN") + "'"
		fmt.Fprintf(w, "  curl -s %s %s/control/state\n", auth, sim)
		fmt.Fprintf(w, "  curl -s %s -d '{\"function\":\"confirmOrder\",\"mode\":\"fail\",\"count\":1}' %s/control/faults\n", auth, sim)
		fmt.Fprintf(w, "It plays the device and the network too: a live eSIM installs (ordering hears of it over\n")
		fmt.Fprintf(w, "ES2+), attaches and uses data, which ordering reads from the simulated network:\n\n")
		fmt.Fprintf(w, "  curl -s %s -X POST %s/control/profiles/<iccid>/install\n", auth, sim)
		fmt.Fprintf(w, "  curl -s %s -X POST %s/control/profiles/<iccid>/attach\n", auth, sim)
		fmt.Fprintf(w, "  curl -s %s -d '{\"bytes\":1073741824}' %s/control/profiles/<iccid>/use\n\n", auth, sim)
	}
	fmt.Fprintf(w, "Try it:\n\n  curl -s -H 'Authorization: Bearer %s' '%s/plans?country=JP&limit=3'\n", p.SandboxKey, p.APIBaseURL)
	fmt.Fprintf(w, "  curl -s -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -H 'Idempotency-Key: first-order' \\\n", p.SandboxKey)
	fmt.Fprintf(w, "    -d '{\"plan_id\": \"<a plan id>\", \"quantity\": 1}' '%s/orders'\n\n", p.APIBaseURL)
	// esimctl's defaults are the default addresses and token file; name
	// what -addr or -operator-token-file moved, or the hint would ask a
	// stranger (or nobody).
	esimctl := "./bin/esimctl"
	if p.URL(platform.Accounts) != "http://127.0.0.1:8081" {
		esimctl += " --accounts-url " + p.URL(platform.Accounts)
	}
	if p.OperatorTokenFile != defaultTokenFile {
		esimctl += " --token-file " + p.OperatorTokenFile
	}
	fmt.Fprintf(w, "Operator CLI: %s accounts get %s\n", esimctl, p.DemoAccountID)
	fmt.Fprintf(w, "Press Ctrl-C to stop.\n")
}
