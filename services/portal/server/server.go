// Package server assembles the portal from its configuration, so that
// main and tests start the very same thing.
package server

import (
	"context"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/portal"
	"github.com/esimplatform/esim/services/portal/redis"
	"github.com/esimplatform/esim/services/portal/web"
)

// Server holds the portal's handler and the Redis client it must close.
type Server struct {
	*service.Server
}

// New wires the portal. Redis being down at start is no error: /readyz
// says so, and sign-ins, sign-ups and new keys fail until it answers.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	log := tel.Logger

	// 1. Redis: the sign-in and sign-up counters, and new keys until
	// their page shows them.
	rdb, err := redis.Connect(cfg.RedisURL.Reveal())
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.WarnContext(ctx, "redis unreachable at start; sign-ins fail until it answers", "err", err)
	}

	// 2. The services behind every page, called as "portal".
	hc := internalauth.Client(tel.HTTPClient(cfg.ServiceTimeout), string(cfg.InternalToken.Reveal()))
	app, err := web.New(web.Deps{
		Accounts: accountsv1.NewAccountsProtobufClient(string(cfg.AccountsURL), hc),
		Wallet:   walletv1.NewWalletProtobufClient(string(cfg.WalletURL), hc),
		Ordering: orderingv1.NewOrderingProtobufClient(string(cfg.OrderingURL), hc),
		Webhook:  webhookv1.NewWebhookProtobufClient(string(cfg.WebhookURL), hc),
		SignIns: redis.NewSignInLimiter(rdb, portal.SignInLimits{
			PerEmail: cfg.SignInLimitPerEmail, PerAddress: cfg.SignInLimitPerAddress, Window: cfg.SignInLimitWindow,
		}),
		SignUps: redis.NewSignUpLimiter(rdb, portal.SignUpLimits{
			PerAddress: cfg.SignUpLimitPerAddress, Window: cfg.SignUpLimitWindow,
		}),
		NewKeys:       redis.NewNewKeys(rdb),
		PublicAPIURL:  string(cfg.PublicAPIURL),
		SecureCookies: cfg.SecureCookies,
		Log:           log,
	})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}

	// 3. Public: a visitor's Request-Id and trace context are not taken.
	srv := service.NewServer(log)
	srv.OnClose("the Redis client", rdb.Close)
	srv.Serve(httpserver.Handler(httpserver.Routes{
		App:         app,
		Telemetry:   tel,
		Route:       web.UnmatchedRoute,
		Public:      true,
		AnswerPanic: app.AnswerPanic,
		Ready: map[string]httpserver.Check{
			"redis": func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		},
		MaxBodyBytes: web.MaxBodyBytes,
	}))
	return &Server{srv}, nil
}
