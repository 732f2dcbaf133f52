// Package server assembles the gateway from its configuration, so that
// main, tests and the benchmark start the very same thing.
package server

import (
	"context"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/httpapi"
	"github.com/esimplatform/esim/services/gateway/redis"
	"github.com/esimplatform/esim/services/gateway/twirpclient"
)

// redisCooldown is how long the auth cache and the rate limiter keep off
// Redis after it fails, before one request probes it again.
const redisCooldown = time.Second

// Server holds the gateway's handler and the Redis client it must close:
// everything else it built is garbage once the handler is.
type Server struct {
	*service.Server
}

// New wires the gateway. It does not fail when Redis is down: the gateway
// then authenticates without its cache and rate-limits per replica (see
// gateway.FailoverLimiter), and says so in its logs.
func New(ctx context.Context, cfg Config, tel *telemetry.Telemetry) (*Server, error) {
	log := tel.Logger

	// 1. Redis: rate-limit counters and the auth cache.
	rdb, err := redis.Connect(cfg.RedisURL.Reveal())
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.WarnContext(ctx, "redis unreachable at start; running degraded until it answers", "err", err)
	}

	// 2. The services the gateway fronts, over Twirp.
	hc := internalauth.Client(tel.HTTPClient(cfg.ServiceTimeout), string(cfg.InternalToken.Reveal()))
	accounts := &gateway.CachedAccounts{
		Accounts: twirpclient.NewAccounts(string(cfg.AccountsURL), hc),
		Cache:    redis.NewAuthCache(rdb, cfg.AuthCacheSecret.Reveal(), log),
		TTL:      cfg.AuthCacheTTL,
		LocalTTL: cfg.AuthCacheTTL / 2,
		Cooldown: redisCooldown,
		Log:      log,
	}
	limiter := &gateway.FailoverLimiter{
		Shared:   redis.NewRateLimiter(rdb, tel.BatchObserver("redis")),
		Local:    &gateway.LocalLimiter{},
		Log:      log,
		Cooldown: redisCooldown,
	}

	// 3. The public API. Placing an order waits longer than any other call.
	orderClient := internalauth.Client(tel.HTTPClient(cfg.OrderTimeout), string(cfg.InternalToken.Reveal()))
	api := httpapi.New(httpapi.Deps{
		Gate:      gateway.Gate{Accounts: accounts, Limiter: limiter, DefaultRateLimit: cfg.RateLimitPerMinute},
		Catalogue: twirpclient.NewCatalogue(string(cfg.CatalogueURL), hc, cfg.ServiceTimeout, tel.BatchObserver("catalogue")),
		Orders:    twirpclient.NewOrdering(string(cfg.OrderingURL), hc, orderClient, cfg.ServiceTimeout, tel.BatchObserver("ordering")),
		Wallet:    twirpclient.NewWallet(string(cfg.WalletURL), hc),
		Events:    twirpclient.NewWebhook(string(cfg.WebhookURL), hc),
		Log:       log,
	})
	srv := service.NewServer(log)
	srv.OnClose("the Redis client", rdb.Close)
	srv.Serve(httpserver.Handler(httpserver.Routes{
		// Readiness has no checks on purpose: with Redis down the gateway
		// still serves, and with accounts or catalogue down it answers with
		// proper JSON errors rather than vanishing from the load balancer.
		// Public: a partner's Request-Id and trace context are not taken.
		App:         api,
		Telemetry:   tel,
		Route:       httpapi.UnmatchedRoute,
		Public:      true,
		AnswerPanic: httpapi.AnswerPanic,
		// Whatever reads a body reads at most what the API accepts.
		MaxBodyBytes: httpapi.MaxBodyBytes,
	}))
	return &Server{srv}, nil
}
