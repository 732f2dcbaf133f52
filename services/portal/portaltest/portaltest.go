// Package portaltest starts the portal in front of the real platform, in
// process: accounts, catalogue (seeded), wallet, ordering, webhook and the
// gateway, each a real HTTP server on loopback with its own Postgres
// database, and the real Redis. Handler tests and browser tests share it.
package portaltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	accountsserver "github.com/esimplatform/esim/services/accounts/server"
	catalogueserver "github.com/esimplatform/esim/services/catalogue/server"
	gatewayserver "github.com/esimplatform/esim/services/gateway/server"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/portal/server"
	walletserver "github.com/esimplatform/esim/services/wallet/server"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// Platform is a started portal and the services behind it.
type Platform struct {
	t testing.TB
	// URL is the portal's base URL (no trailing slash).
	URL string
	// GatewayURL is the partner API's server; APIURL its /v1 base, which
	// the portal's curl examples name.
	GatewayURL, APIURL string
	// Operator clients of the services, for setting up and checking what
	// the portal did.
	Accounts  accountsv1.Accounts
	Catalogue cataloguev1.Catalogue
	Wallet    walletv1.Wallet
	Ordering  orderingv1.Ordering
	Webhook   webhookv1.Webhook
	// AccountsURL and OrderingURL let a test call accounts and ordering
	// as another caller (ordering's top-ups as the gateway).
	AccountsURL, OrderingURL string

	cfg server.Config
	tel *telemetry.Telemetry
}

// Options change the portal's configuration from Start's.
type Options struct {
	// Sign-in limits; Start's are 5 per email and 1,000 per address (the
	// tests all come from 127.0.0.1), in a 15 minute window.
	SignInLimitPerEmail, SignInLimitPerAddress int
	SignInLimitWindow                          time.Duration
	// Sign-ups and invite acceptances per address; Start's are 1,000
	// (the tests all come from 127.0.0.1), in an hour.
	SignUpLimitPerAddress int
	SignUpLimitWindow     time.Duration
	// RedisURL is the Redis of the sign-in counters; TEST_REDIS_URL, or
	// the local one, when empty.
	RedisURL string
}

// Start starts the platform and the portal with Start's options.
func Start(t testing.TB) *Platform { return StartWith(t, Options{}) }

// StartWith starts the platform and the portal with opt.
func StartWith(t testing.TB, opt Options) *Platform {
	t.Helper()
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "test", telemetry.Config{LogLevel: "error"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(h http.Handler) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}

	acc, err := accountsserver.New(ctx, accountsserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acc.Close)
	accountsURL := serve(acc.Handler())

	cat, err := catalogueserver.New(ctx, catalogueserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), SeedCatalogue: true, Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	catalogueURL := serve(cat.Handler())

	wal, err := walletserver.New(ctx, walletserver.Config{DatabaseURL: config.NewSecretURL(pgtest.NewDatabase(t)), Callers: internalauthtest.Callers()}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wal.Close)
	walletURL := serve(wal.Handler())

	// The gateway's address is known before it starts, so that the eSIMs'
	// QR links point at it.
	gw := httptest.NewUnstartedServer(nil)
	t.Cleanup(gw.Close)
	deps := &orderingtest.Deps{CatalogueURL: catalogueURL, WalletURL: walletURL,
		Wallet: walletv1.NewWalletProtobufClient(walletURL, internalauthtest.Client(internalauth.Operator))}
	orderingCfg := deps.Config(t)
	gatewayURL := "http://" + gw.Listener.Addr().String()
	orderingCfg.QRBaseURL = config.BaseURL(gatewayURL + "/qr")
	_, orderingURL := orderingtest.StartWith(t, orderingCfg, tel)

	_, webhookURL := webhooktest.StartServer(t, webhooktest.Config(t, deps.Kafka), tel)

	redisURL := opt.RedisURL
	if redisURL == "" {
		redisURL = RedisURL()
	}
	gateway, err := gatewayserver.New(ctx, gatewayserver.Config{
		AccountsURL:        config.BaseURL(accountsURL),
		CatalogueURL:       config.BaseURL(catalogueURL),
		OrderingURL:        config.BaseURL(orderingURL),
		WalletURL:          config.BaseURL(walletURL),
		WebhookURL:         config.BaseURL(webhookURL),
		ServiceTimeout:     5 * time.Second,
		OrderTimeout:       20 * time.Second,
		RedisURL:           config.NewSecretURL(redisURL),
		RateLimitPerMinute: 100_000,
		AuthCacheTTL:       time.Second,
		AuthCacheSecret:    config.NewSecret("portaltest-auth-cache-secret-0123456789abcdef"),
		InternalToken:      config.NewSecret(internalauthtest.Token(internalauth.Gateway)),
	}, tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gateway.Close)
	gw.Config.Handler = gateway.Handler()
	gw.Start()

	cfg := Config(accountsURL, walletURL, orderingURL, webhookURL, gatewayURL+"/v1", redisURL)
	if opt.SignInLimitPerEmail > 0 {
		cfg.SignInLimitPerEmail = opt.SignInLimitPerEmail
	}
	if opt.SignInLimitPerAddress > 0 {
		cfg.SignInLimitPerAddress = opt.SignInLimitPerAddress
	}
	if opt.SignInLimitWindow > 0 {
		cfg.SignInLimitWindow = opt.SignInLimitWindow
	}
	if opt.SignUpLimitPerAddress > 0 {
		cfg.SignUpLimitPerAddress = opt.SignUpLimitPerAddress
	}
	if opt.SignUpLimitWindow > 0 {
		cfg.SignUpLimitWindow = opt.SignUpLimitWindow
	}
	p := &Platform{
		t:           t,
		cfg:         cfg,
		tel:         tel,
		GatewayURL:  gatewayURL,
		APIURL:      gatewayURL + "/v1",
		Accounts:    accountsv1.NewAccountsProtobufClient(accountsURL, internalauthtest.Client(internalauth.Operator)),
		Catalogue:   cataloguev1.NewCatalogueProtobufClient(catalogueURL, internalauthtest.Client(internalauth.Operator)),
		Wallet:      deps.Wallet,
		Ordering:    orderingtest.Client(orderingURL, internalauth.Operator),
		Webhook:     webhooktest.Client(webhookURL, internalauth.Operator),
		AccountsURL: accountsURL,
		OrderingURL: orderingURL,
	}
	p.URL = p.StartPortal(nil)
	return p
}

// StartPortal starts a portal in front of the platform's services, its
// configuration changed by edit (when not nil), and returns its base URL:
// a test of a page whose service fails starts one that calls a closed
// port instead.
func (p *Platform) StartPortal(edit func(*server.Config)) string {
	p.t.Helper()
	cfg := p.cfg
	if edit != nil {
		edit(&cfg)
	}
	portal, err := server.New(context.Background(), cfg, p.tel)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(portal.Close)
	s := httptest.NewServer(portal.Handler())
	p.t.Cleanup(s.Close)
	return s.URL
}

// Config is the portal's configuration for a test against the given
// services, as the platform sets it but for plain-http cookies and a
// per-address sign-in and sign-up limits that the tests, all from
// 127.0.0.1, do not reach.
func Config(accountsURL, walletURL, orderingURL, webhookURL, publicAPIURL, redisURL string) server.Config {
	return server.Config{
		AccountsURL:           config.BaseURL(accountsURL),
		WalletURL:             config.BaseURL(walletURL),
		OrderingURL:           config.BaseURL(orderingURL),
		WebhookURL:            config.BaseURL(webhookURL),
		InternalToken:         config.NewSecret(internalauthtest.Token(internalauth.Portal)),
		RedisURL:              config.NewSecretURL(redisURL),
		PublicAPIURL:          config.BaseURL(publicAPIURL),
		SecureCookies:         false,
		ServiceTimeout:        5 * time.Second,
		SignInLimitPerEmail:   5,
		SignInLimitPerAddress: 1000,
		SignInLimitWindow:     15 * time.Minute,
		SignUpLimitPerAddress: 1000,
		SignUpLimitWindow:     time.Hour,
	}
}

// RedisURL is the Redis of the test run: TEST_REDIS_URL, or database 1 of
// the local server `make test` expects. Not make run's database 0: the
// tests' failed sign-ins from 127.0.0.1 would count against a
// developer's own sign-ins there.
func RedisURL() string {
	if u := getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/1"
}

// UniqueEmail is an email no other test (or earlier run: the sign-in
// counters outlive a test in Redis) has used.
func UniqueEmail(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b) + "@example.com"
}
