// Package platform starts the whole eSIM platform on one machine: it checks
// that the local Postgres and Redis answer, creates the services' databases,
// runs every service binary as a child process on loopback, waits until each
// is ready and hands back a demo partner with a working sandbox key. Both
// `make run` (cmd/platform) and the benchmark (cmd/bench) start it this way,
// so what is measured is what developers run.
package platform

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/cmd/internal/operator"
	"github.com/esimplatform/esim/cmd/internal/services"
	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka/embedded"
	"github.com/esimplatform/esim/libs/money"
	"github.com/esimplatform/esim/libs/postgres"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
)

// The services the launcher itself talks to, besides starting them all:
// accounts for the demo partner, the gateway as the partner API. Every
// service's name is also its binary's in bin/ and its log file's.
const (
	Accounts  = "accounts"
	Catalogue = "catalogue"
	Gateway   = "gateway"
	Wallet    = "wallet"
	SMDPSim   = "smdp-sim"
	Portal    = "portal"
)

// DemoPortalEmail is the demo partner's portal user; every start gives it
// a new password.
const DemoPortalEmail = "demo@esim.example"

// DemoSandboxBalance is what every start tops the demo partner's sandbox
// and live balances up to, in minor units: 1000.00 USD to order with. The
// live one is play money too: make run's live orders go to the SM-DP+
// simulator.
const DemoSandboxBalance = 1000_00

// DemoAccountID is the demo partner of `make run`. It is fixed so reruns
// find the same partner (and its orders) instead of creating a new one.
const DemoAccountID = "de300000-0000-4000-8000-00000000d3e0"

// demoAccountName is the display name of the demo partner.
const demoAccountName = "Demo Partner"

// Defaults of Options.
const (
	DefaultPGURL    = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL = "redis://127.0.0.1:6379/0"
	DefaultKeyName  = "make run"
)

// Options configure Start. The zero value starts the platform of `make run`.
type Options struct {
	// PGURL is the Postgres server (any database on it): the services'
	// databases are created next to it.
	PGURL string
	// RedisURL is the Redis of the services that use one.
	RedisURL string
	// KafkaBrokers are the bootstrap addresses of the Kafka cluster of
	// the services that use one. Empty starts a broker in this process
	// (libs/kafka/embedded) that keeps its data under <RunDir>/kafka, so
	// events published before a restart are still there after it.
	KafkaBrokers []string
	// Services are what to start; by default services.yaml, found from
	// the working directory up.
	Services services.Platform
	// Addrs are listen addresses by service name, and by
	// services.Service.ListenerKey for further listeners, over the
	// default of 127.0.0.1 and the port services.yaml gives.
	Addrs map[string]string
	// BinDir holds the service binaries; by default the directory of the
	// running executable, since `make build` puts every binary in bin/.
	BinDir string
	// RunDir receives logs/<service>.log; ".run" by default.
	RunDir string
	// DatabasePrefix names the services' databases (<prefix>accounts,
	// <prefix>catalogue); "esim_" by default. Tests use their own so they
	// never touch a developer's data.
	DatabasePrefix string
	// Env adds or overrides environment variables of one service, keyed by
	// service name ("gateway": {"RATE_LIMIT_PER_MINUTE=100000000"}).
	Env map[string][]string
	// KeyName names the sandbox key created at every start; earlier active
	// keys of the demo account with this name are revoked.
	KeyName string
	// KeysDir keeps the keys services.yaml lists under keys, made on
	// first use, as <KeysDir>/<database prefix><service>/<NAME>: with the
	// databases whose contents they open. <RunDir>/keys by default; make
	// run and the benchmark, whose databases outlive any checkout, keep
	// them per machine (operator.DefaultKeysDir).
	KeysDir string
	// OperatorTokenFile receives the operator credential of this start,
	// where esimctl reads it; <RunDir>/operator-token by default.
	OperatorTokenFile string
	// ReadyTimeout bounds the wait for each service's /readyz. The first
	// start migrates and seeds, so it is generous by default (90 s).
	ReadyTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL (15 s).
	StopGrace time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer

	// install is where the preflight's hints look for an installed Postgres
	// and Redis; nil is this machine. Tests pretend another, so the hints
	// they check do not depend on the machine running them.
	install *localInstall
}

func (o *Options) defaults() error {
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&o.PGURL, DefaultPGURL)
	set(&o.RedisURL, DefaultRedisURL)
	set(&o.RunDir, ".run")
	set(&o.DatabasePrefix, "esim_")
	set(&o.KeyName, DefaultKeyName)
	set(&o.OperatorTokenFile, filepath.Join(o.RunDir, "operator-token"))
	set(&o.KeysDir, filepath.Join(o.RunDir, "keys"))
	if o.Services == nil {
		path, err := services.Find(".")
		if err != nil {
			return err
		}
		if o.Services, err = services.Load(path); err != nil {
			return err
		}
	}
	addrs := map[string]string{}
	for _, s := range o.Services {
		addrs[s.Name] = fmt.Sprintf("127.0.0.1:%d", s.Port)
		for v, port := range s.Listeners {
			addrs[s.ListenerKey(v)] = fmt.Sprintf("127.0.0.1:%d", port)
		}
	}
	for name, addr := range o.Addrs {
		if _, ok := addrs[name]; !ok {
			return fmt.Errorf("an address for %q, which is no service or listener (%s)", name, strings.Join(slices.Sorted(maps.Keys(addrs)), ", "))
		}
		addrs[name] = addr
	}
	o.Addrs = addrs
	if o.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("locate the running executable to find the service binaries next to it: %w", err)
		}
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		o.BinDir = filepath.Dir(exe)
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 15 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.install == nil {
		o.install = thisMachine()
	}
	return nil
}

// Service describes one running child.
type Service struct {
	Name string
	// URL is the service's base URL (its Twirp base URL, but for the
	// gateway's).
	URL string
	PID int
}

// Platform is a started platform. Stop it with Stop.
type Platform struct {
	// APIBaseURL is the public API, e.g. http://127.0.0.1:8080/v1.
	APIBaseURL string
	// DemoAccountID is the demo partner's account.
	DemoAccountID string
	// SandboxKey is a fresh secret of the demo partner, created by this start.
	SandboxKey string
	// SandboxKeyID identifies SandboxKey (for revocation).
	SandboxKeyID string
	// LiveKey is a fresh live secret of the demo partner, whose orders go
	// to the SM-DP+ of services.yaml (the simulator), and LiveKeyID its id.
	LiveKey   string
	LiveKeyID string
	// PortalURL is the partner portal, and DemoPortalPassword the demo
	// user's password of this start; both empty without a portal.
	PortalURL          string
	DemoPortalPassword string
	// DemoBalance and DemoLiveBalance are the demo partner's sandbox and
	// live balances after the start's top-ups, in minor units.
	DemoBalance     int64
	DemoLiveBalance int64
	// OperatorToken is this start's operator credential, written to
	// OperatorTokenFile for esimctl.
	OperatorToken     string
	OperatorTokenFile string
	LogDir            string

	// KafkaBrokers are the Kafka cluster the services were given: the
	// one of Options, or the embedded broker's.
	KafkaBrokers []string

	urls map[string]string
	// secrets are the fresh secrets of this start (services.yaml
	// secrets), by service, then variable.
	secrets map[string]map[string]string
	// certs is the development PKI of the services whose settings name
	// ${certs}; empty when none does.
	certs    devcerts.Files
	children []*child // in start order
	broker   *embedded.Broker
	grace    time.Duration
	exited   chan error
}

// URL is the base URL of the named service ("" for none).
func (p *Platform) URL(name string) string { return p.urls[name] }

// Secret is the fresh secret this start gave service as variable (one of
// its services.yaml secrets, such as the simulator's CONTROL_TOKEN), or
// "" when it gave none.
func (p *Platform) Secret(service, variable string) string { return p.secrets[service][variable] }

// Services lists the running children in start order.
func (p *Platform) Services() []Service {
	out := make([]Service, 0, len(p.children))
	for _, c := range p.children {
		out = append(out, Service{Name: c.name, URL: c.url, PID: c.pid()})
	}
	return out
}

// Exited reports the first child that stops without being asked to, so a
// caller that stays up (make run) does not keep advertising a dead platform.
func (p *Platform) Exited() <-chan error { return p.exited }

// operatorClient is an HTTP client with the operator credential, as
// esimctl calls.
func (p *Platform) operatorClient() *http.Client {
	return internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken)
}

// Start brings the platform up. On error nothing it started is left running.
func Start(ctx context.Context, opts Options) (*Platform, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	say := func(format string, args ...any) { fmt.Fprintf(opts.Progress, "==> "+format+"\n", args...) }

	// Everything that can be checked before starting a process is checked
	// first, so a missing dependency gives one clear message instead of
	// every service failing its readiness probe.
	say("checking Postgres at %s and Redis at %s", postgres.Redact(opts.PGURL), redactRedis(opts.RedisURL))
	if err := preflight(ctx, opts); err != nil {
		return nil, err
	}

	logDir := filepath.Join(opts.RunDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	p := &Platform{
		APIBaseURL:        "http://" + opts.Addrs[opts.Services.Public().Name] + "/v1",
		OperatorToken:     internalauth.NewToken(),
		OperatorTokenFile: opts.OperatorTokenFile,
		LogDir:            logDir,
		urls:              map[string]string{},
		secrets:           map[string]map[string]string{},
		grace:             opts.StopGrace,
		exited:            make(chan error, len(opts.Services)),
	}
	for _, s := range opts.Services {
		p.urls[s.Name] = "http://" + opts.Addrs[s.Name]
	}
	if err := p.makeCerts(opts, say); err != nil {
		return nil, err
	}
	if err := p.startKafka(opts, say); err != nil {
		return nil, err
	}
	specs, err := p.childSpecs(ctx, opts)
	if err != nil {
		p.stopKafka()
		return nil, err
	}
	if err := operator.WriteToken(opts.OperatorTokenFile, p.OperatorToken); err != nil {
		return nil, err
	}

	fail := func(err error) (*Platform, error) {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.StopGrace+5*time.Second)
		defer cancel()
		// Already-exited services were reported in err; Stop adds only a
		// service that had to be killed or did not exit cleanly.
		return nil, errors.Join(err, p.Stop(stopCtx))
	}

	// A service starts once those it calls are ready: their readiness does
	// not depend on it, and migrations on a first start take a while.
	for _, group := range opts.Services.StartOrder() {
		started := make([]*child, 0, len(group))
		for _, s := range group {
			spec := specs[s.Name]
			say("starting %s on %s (log: %s)", s.Name, spec.addr, spec.logPath)
			c, err := startChild(spec, p.exited)
			if err != nil {
				return fail(err)
			}
			p.children = append(p.children, c)
			started = append(started, c)
		}
		errs := make(chan error, len(started))
		for _, c := range started {
			go func() { errs <- c.waitReady(ctx, opts.ReadyTimeout) }()
		}
		var all []error
		for range started {
			all = append(all, <-errs)
		}
		if err := errors.Join(all...); err != nil {
			return fail(err)
		}
	}

	say("ensuring demo partner %s and fresh sandbox and live keys", DemoAccountID)
	accounts := accountsv1.NewAccountsProtobufClient(p.URL(Accounts), p.operatorClient())
	if err := p.ensureDemo(ctx, accounts, opts.KeyName); err != nil {
		return fail(err)
	}
	if p.URL(Portal) != "" {
		say("giving the demo partner's portal user %s a fresh password", DemoPortalEmail)
		if err := p.ensureDemoPortalUser(ctx, accounts); err != nil {
			return fail(err)
		}
	}
	if p.URL(Wallet) != "" {
		say("topping the demo partner's sandbox and live balances up to %s USD", money.Decimal(DemoSandboxBalance))
		wallet := walletv1.NewWalletProtobufClient(p.URL(Wallet), p.operatorClient())
		if p.DemoBalance, err = p.ensureDemoBalance(ctx, wallet, accountsv1.Environment_ENVIRONMENT_SANDBOX, p.SandboxKeyID); err != nil {
			return fail(err)
		}
		if p.DemoLiveBalance, err = p.ensureDemoBalance(ctx, wallet, accountsv1.Environment_ENVIRONMENT_LIVE, p.LiveKeyID); err != nil {
			return fail(err)
		}
	}
	return p, nil
}

// ensureDemoBalance tops the demo partner's balance in env up to
// DemoSandboxBalance, so every start has money to order with, and returns
// it. The top-up's reference names this start's key, so it counts once
// however often it is sent.
func (p *Platform) ensureDemoBalance(ctx context.Context, wallet walletv1.Wallet, env accountsv1.Environment, keyID string) (int64, error) {
	b, err := wallet.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: p.DemoAccountID, Environment: env, Currency: "USD"})
	if err != nil {
		return 0, fmt.Errorf("read the demo partner's %s balance: %w", env.ShortName(), err)
	}
	if b.GetAmountMinor() >= DemoSandboxBalance {
		return b.GetAmountMinor(), nil
	}
	entry, err := wallet.TopUp(ctx, &walletv1.TopUpRequest{
		AccountId: p.DemoAccountID, Environment: env, Currency: "USD",
		AmountMinor: DemoSandboxBalance - b.GetAmountMinor(), Reference: "make-run-" + keyID,
		Note: "make run: the demo partner's " + env.ShortName() + " balance",
	})
	if err != nil {
		return 0, fmt.Errorf("top up the demo partner's %s balance: %w", env.ShortName(), err)
	}
	return entry.GetBalanceAfterMinor(), nil
}

// childSpecs makes every service's settings from the declaration: its
// address, its database (created here), Redis, the URLs and credential to
// call others, the credentials it accepts, fresh secrets and its own
// settings, then Options.Env over them.
func (p *Platform) childSpecs(ctx context.Context, opts Options) (map[string]childSpec, error) {
	// SHUTDOWN_TIMEOUT is below StopGrace so a service drains on its own
	// before Stop resorts to SIGKILL. METRICS_ADDR is cleared: one exported
	// in the shell would send every service to the same port; here
	// /metrics shares each service's own port.
	common := []string{"SHUTDOWN_TIMEOUT=" + (opts.StopGrace * 2 / 3).String(), "LOG_LEVEL=info", "METRICS_ADDR="}
	// A token for every service that calls another, new at every start:
	// nothing outlives the processes that hold it.
	tokens := map[string]string{}
	for _, s := range opts.Services {
		if len(s.Calls) > 0 {
			tokens[s.Name] = internalauth.NewToken()
		}
	}
	specs := map[string]childSpec{}
	for _, s := range opts.Services {
		env := append(slices.Clone(common), "HTTP_ADDR="+opts.Addrs[s.Name])
		if s.Database {
			db, err := databaseURL(opts.PGURL, opts.DatabasePrefix+s.Name)
			if err != nil {
				return nil, err
			}
			if err := postgres.EnsureDatabase(ctx, db); err != nil {
				return nil, fmt.Errorf("create database: %w", err)
			}
			env = append(env, "DATABASE_URL="+db)
		}
		if s.Redis {
			env = append(env, "REDIS_URL="+opts.RedisURL)
		}
		if s.Kafka {
			env = append(env, "KAFKA_BROKERS="+strings.Join(p.KafkaBrokers, ","))
		}
		for _, callee := range s.Calls {
			c, _ := opts.Services.Get(callee)
			env = append(env, c.URLVar()+"="+p.URL(callee))
		}
		if token, ok := tokens[s.Name]; ok {
			env = append(env, "INTERNAL_TOKEN="+token)
		}
		if !s.Public {
			callers := []string{internalauth.Entry(internalauth.Operator, p.OperatorToken)}
			for _, caller := range opts.Services.CallersOf(s.Name) {
				callers = append(callers, internalauth.Entry(internalauth.Caller(caller), tokens[caller]))
			}
			env = append(env, "CALLERS="+strings.Join(callers, ","))
		}
		for _, name := range s.Secrets {
			secret := newSecret()
			if p.secrets[s.Name] == nil {
				p.secrets[s.Name] = map[string]string{}
			}
			p.secrets[s.Name][name] = secret
			env = append(env, name+"="+secret)
		}
		for _, name := range s.Keys {
			key, err := keptSecret(filepath.Join(opts.KeysDir, opts.DatabasePrefix+s.Name, name))
			if err != nil {
				return nil, err
			}
			env = append(env, name+"="+key)
		}
		for v := range s.Listeners {
			env = append(env, v+"="+opts.Addrs[s.ListenerKey(v)])
		}
		for _, name := range slices.Sorted(maps.Keys(s.Env)) {
			env = append(env, name+"="+os.Expand(s.Env[name], func(key string) string { return expand(key, opts, p.certs) }))
		}
		spec := childSpec{
			name:    s.Name,
			addr:    opts.Addrs[s.Name],
			url:     p.URL(s.Name),
			bin:     filepath.Join(opts.BinDir, s.Name),
			logPath: filepath.Join(p.LogDir, s.Name+".log"),
			env:     append(env, opts.Env[s.Name]...),
		}
		if _, err := os.Stat(spec.bin); err != nil {
			return nil, fmt.Errorf("service binary %s not found (build it with `make build`): %w", spec.bin, err)
		}
		specs[s.Name] = spec
	}
	return specs, nil
}

// ensureDemo makes the demo partner exist and gives it a new sandbox key.
// Secrets are shown only once, so every start mints a new key rather than
// trying to reuse one; the previous keys of the same name are revoked so
// reruns do not pile up live credentials.
func (p *Platform) ensureDemo(ctx context.Context, accounts accountsv1.Accounts, keyName string) error {
	acct, err := accounts.CreateAccount(ctx, &accountsv1.CreateAccountRequest{
		Id: DemoAccountID, Name: demoAccountName, Currency: "USD",
	})
	var twerr twirp.Error
	if errors.As(err, &twerr) && twerr.Code() == twirp.AlreadyExists {
		acct, err = accounts.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: DemoAccountID})
	}
	if err != nil {
		return fmt.Errorf("ensure demo account %s: %w", DemoAccountID, err)
	}
	p.DemoAccountID = acct.GetId()

	for _, k := range []struct {
		env        accountsv1.Environment
		secret, id *string
	}{
		{accountsv1.Environment_ENVIRONMENT_SANDBOX, &p.SandboxKey, &p.SandboxKeyID},
		{accountsv1.Environment_ENVIRONMENT_LIVE, &p.LiveKey, &p.LiveKeyID},
	} {
		created, err := accounts.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: acct.GetId(), Environment: k.env, Name: keyName})
		if err != nil {
			return fmt.Errorf("create %s key for the demo account: %w", k.env.ShortName(), err)
		}
		*k.secret, *k.id = created.GetSecret(), created.GetKey().GetId()
	}

	// Revoked after the new key exists, so a failure here still leaves a
	// working key.
	// Every page: a start that dies before this step leaves its key active,
	// and a hundred starts later it is no longer on the first.
	var stale []string
	for page, seen := int32(1), 0; ; page++ {
		keys, err := accounts.ListKeys(ctx, &accountsv1.ListKeysRequest{AccountId: acct.GetId(), Page: page})
		if err != nil {
			return fmt.Errorf("list the demo account's keys: %w", err)
		}
		for _, k := range keys.GetKeys() {
			if k.GetName() == keyName && k.GetId() != p.SandboxKeyID && k.GetId() != p.LiveKeyID && k.GetRevokedAt() == nil {
				stale = append(stale, k.GetId())
			}
		}
		if seen += len(keys.GetKeys()); len(keys.GetKeys()) == 0 || seen >= int(keys.GetTotal()) {
			break
		}
	}
	for _, id := range stale {
		if _, err := accounts.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: acct.GetId(), KeyId: id}); err != nil {
			return fmt.Errorf("revoke previous %q key %s: %w", keyName, id, err)
		}
	}
	return nil
}

// ensureDemoPortalUser makes the demo partner's portal user exist with a
// new password, as an operator would: an invitation, accepted at once.
// Like the keys, the password is shown once and replaced at every start.
func (p *Platform) ensureDemoPortalUser(ctx context.Context, accounts accountsv1.Accounts) error {
	invite, err := accounts.InviteUser(ctx, &accountsv1.InviteUserRequest{AccountId: p.DemoAccountID, Email: DemoPortalEmail})
	if err != nil {
		return fmt.Errorf("invite the demo portal user: %w", err)
	}
	password := rand.Text() // 26 characters of base32, 130 bits
	if _, err := accounts.AcceptInvite(ctx, &accountsv1.AcceptInviteRequest{Token: invite.GetToken(), Password: password}); err != nil {
		return fmt.Errorf("set the demo portal user's password: %w", err)
	}
	p.PortalURL, p.DemoPortalPassword = p.URL(Portal), password
	return nil
}

// RevokeKeys revokes the keys this start minted, for callers (the
// benchmark) whose keys must not outlive them.
func (p *Platform) RevokeKeys(ctx context.Context) error {
	accounts := accountsv1.NewAccountsProtobufClient(p.URL(Accounts), p.operatorClient())
	for _, id := range []string{p.SandboxKeyID, p.LiveKeyID} {
		if _, err := accounts.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: p.DemoAccountID, KeyId: id}); err != nil {
			return fmt.Errorf("revoke key %s: %w", id, err)
		}
	}
	return nil
}

// Stop sends SIGTERM to every child, gateway first so it stops taking
// traffic before its backends go, and waits for them; a child still running
// after the grace period is killed. It returns an error naming each child
// that did not stop cleanly.
func (p *Platform) Stop(ctx context.Context) error {
	var errs []error
	for i := len(p.children) - 1; i >= 0; i-- {
		if err := p.children[i].stop(ctx, p.grace); err != nil {
			errs = append(errs, err)
		}
	}
	p.stopKafka()
	return errors.Join(errs...)
}

// CertsDir is where the development certificates ${certs} of
// services.yaml stand for are kept, under Options.RunDir.
const CertsDir = "certs"

// makeCerts makes, or keeps from an earlier start, the development CA and
// the certificates of loopback that services.yaml's ${certs} names: the
// mutual TLS between ordering and the SM-DP+ simulator.
func (p *Platform) makeCerts(opts Options, say func(string, ...any)) error {
	uses := slices.ContainsFunc(opts.Services, func(s services.Service) bool {
		return slices.ContainsFunc(slices.Collect(maps.Values(s.Env)), func(v string) bool { return strings.Contains(v, "${certs}") })
	})
	if !uses {
		return nil
	}
	dir, err := filepath.Abs(filepath.Join(opts.RunDir, CertsDir))
	if err != nil {
		return err
	}
	if p.certs, err = devcerts.Ensure(dir, "127.0.0.1", "localhost"); err != nil {
		return fmt.Errorf("development certificates: %w", err)
	}
	say("development CA and certificates for mutual TLS in %s", dir)
	return nil
}

// expand gives ${key} in a service's env in services.yaml its value:
// certs is the development certificates' directory, <service>.<VAR> a
// further listener's address, and a service's name its base URL.
func expand(key string, opts Options, certs devcerts.Files) string {
	if key == "certs" {
		return certs.Dir
	}
	addr, ok := opts.Addrs[key]
	if !ok || strings.Contains(key, ".") {
		return addr
	}
	return "http://" + addr
}

// startKafka gives the services the cluster of Options or, when none is
// named and a service uses Kafka, a broker embedded in this process.
func (p *Platform) startKafka(opts Options, say func(string, ...any)) error {
	if len(opts.KafkaBrokers) > 0 {
		p.KafkaBrokers = opts.KafkaBrokers
		return nil
	}
	if !slices.ContainsFunc(opts.Services, func(s services.Service) bool { return s.Kafka }) {
		return nil
	}
	dir := filepath.Join(opts.RunDir, "kafka")
	b, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		return err
	}
	p.broker, p.KafkaBrokers = b, b.Addrs()
	say("started an embedded Kafka broker on %s (data: %s; set KAFKA_BROKERS to use a cluster)", strings.Join(b.Addrs(), ","), dir)
	return nil
}

func (p *Platform) stopKafka() {
	if p.broker != nil {
		p.broker.Close()
		p.broker = nil
	}
}

// keptSecret returns the secret kept in path, made there on first use.
func keptSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read a kept secret: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("keep a secret: %w", err)
	}
	secret := newSecret()
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep a secret: %w", err)
	}
	return secret, nil
}

// newSecret returns 256 random bits as text, as `openssl rand -base64 32`
// does.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.StdEncoding.EncodeToString(b)
}

// databaseURL returns serverURL pointing at database name instead. It
// takes only the URL form: pgx reads anything else as key=value settings.
// Neither error quotes serverURL, which may hold a password; nor a URL
// rebuilt from it, which would look like the form asked for.
func databaseURL(serverURL, name string) (string, error) {
	if !strings.HasPrefix(serverURL, "postgres://") && !strings.HasPrefix(serverURL, "postgresql://") {
		return "", fmt.Errorf("PG_URL is in key=value form; give it as a postgres:// URL (like %s)", DefaultPGURL)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("PG_URL is not a valid postgres:// URL; give one like %s", DefaultPGURL)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// checkPortFree fails when addr is taken, which almost always means another
// `make run` is still up: its services would answer our readiness probes and
// hide that ours could not bind.
func checkPortFree(name, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s address %s is not free (is another `make run` or bench still running?): %w", name, addr, err)
	}
	return ln.Close()
}
