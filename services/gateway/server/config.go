package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/esimplatform/esim/libs/redisurl"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
)

// Config is everything the gateway reads from its environment.
// The Helm chart sets exactly these variables (checked by charts tests).
type Config struct {
	HTTP    httpserver.Config
	Runtime config.Runtime
	// The Twirp base URLs of the services the gateway calls.
	AccountsURL  config.BaseURL `env:"ACCOUNTS_URL, required"`
	CatalogueURL config.BaseURL `env:"CATALOGUE_URL, required"`
	OrderingURL  config.BaseURL `env:"ORDERING_URL, required"`
	WalletURL    config.BaseURL `env:"WALLET_URL, required"`
	WebhookURL   config.BaseURL `env:"WEBHOOK_URL, required"`
	// ServiceTimeout bounds every call to another service but placing an
	// order.
	ServiceTimeout time.Duration `env:"SERVICE_TIMEOUT, default=5s"`
	// OrderTimeout bounds placing an order, which waits for the provider
	// to issue every eSIM. A partner whose call times out retries with the
	// same Idempotency-Key and gets the order ordering went on to finish.
	OrderTimeout time.Duration `env:"ORDER_TIMEOUT, default=20s"`
	// RedisURL names the Redis of the rate limits and the auth cache; its
	// password never shows.
	RedisURL config.SecretURL `env:"REDIS_URL, default=redis://127.0.0.1:6379/0"`
	// RateLimitPerMinute applies to every API key whose account has no
	// limit of its own.
	RateLimitPerMinute int `env:"RATE_LIMIT_PER_MINUTE, default=1200"`
	// AuthCacheTTL is how long an authenticated key is trusted without
	// asking accounts again (in Redis; each replica keeps answers half as
	// long in memory). A revocation lands within 1.5 x AUTH_CACHE_TTL; the
	// platform promises 5 s, so at most 3s is accepted.
	AuthCacheTTL time.Duration `env:"AUTH_CACHE_TTL, default=2s"`
	// AuthCacheSecret signs every entry of the auth cache in Redis, so
	// that whoever can write to Redis still cannot make up a principal
	// (and spend another partner's balance). Every replica needs the
	// same one.
	AuthCacheSecret config.Secret `env:"AUTH_CACHE_SECRET, required"`
	// InternalToken is the gateway's credential for the services it calls
	// (libs/internalauth); they hold its SHA-256 in their CALLERS.
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"`
	Telemetry     telemetry.Config
}

// minAuthCacheSecret is the shortest AUTH_CACHE_SECRET accepted, in
// bytes: 256 bits if random, as `openssl rand -base64 32` gives (44
// characters).
const minAuthCacheSecret = 32

// maxServiceTimeout keeps a request's two calls in a row (accounts, then
// catalogue) within the server's write deadline, with 10 s left to answer:
// 25 s.
const maxServiceTimeout = (httpserver.WriteTimeout - 10*time.Second) / 2

// maxRateLimitPerMinute bounds the default limit's arithmetic, not the
// traffic: a billion a minute is beyond any deployment (make bench sets it
// to stay out of the way), and keeps the GCRA's interval (60 s / limit) and
// the RateLimit-* headers far inside their ranges, so RateLimit-Remaining
// cannot overflow negative.
const maxRateLimitPerMinute = 1_000_000_000

// maxAuthCacheTTL keeps a revocation, which lands within 1.5 x the TTL,
// inside the platform's 5 s promise with room to spare.
const maxAuthCacheTTL = 3 * time.Second

// Validate checks what the types alone cannot; config.Parse runs it. The
// deployment checks parse the values the charts render, so a chart cannot
// ship a gateway that refuses to start.
func (c Config) Validate() error {
	var errs []error
	// The in-process layer keeps answers for half the shared TTL, so a
	// revocation lands within 1.5 x AUTH_CACHE_TTL; the platform promises 5 s.
	// 3 s, not "whatever keeps 1.5 x TTL under 5 s": the bound operators
	// read in the docs and the message is the one enforced.
	if c.AuthCacheTTL <= 0 || c.AuthCacheTTL > maxAuthCacheTTL {
		errs = append(errs, fmt.Errorf("AUTH_CACHE_TTL %s: must be above 0 and at most 3s, so revoked keys stop within 5s", c.AuthCacheTTL))
	}
	if n := len(c.AuthCacheSecret.Reveal()); n < minAuthCacheSecret {
		errs = append(errs, fmt.Errorf("AUTH_CACHE_SECRET: %d bytes; want at least %d, such as `openssl rand -base64 32` prints", n, minAuthCacheSecret))
	}
	if n := len(c.InternalToken.Reveal()); n < internalauth.MinTokenLength {
		errs = append(errs, fmt.Errorf("INTERNAL_TOKEN: %d bytes; want at least %d, such as `openssl rand -base64 32` prints", n, internalauth.MinTokenLength))
	}
	if c.RateLimitPerMinute <= 0 || c.RateLimitPerMinute > maxRateLimitPerMinute {
		errs = append(errs, fmt.Errorf("RATE_LIMIT_PER_MINUTE %d: must be from 1 to %d", c.RateLimitPerMinute, maxRateLimitPerMinute))
	}
	if c.ServiceTimeout <= 0 || c.ServiceTimeout > maxServiceTimeout {
		errs = append(errs, fmt.Errorf("SERVICE_TIMEOUT %s: must be above 0 and at most %s, so a request's calls to accounts and catalogue end before its answer's write deadline", c.ServiceTimeout, maxServiceTimeout))
	}
	if c.OrderTimeout <= 0 || c.OrderTimeout > maxServiceTimeout {
		errs = append(errs, fmt.Errorf("ORDER_TIMEOUT %s: must be above 0 and at most %s, so an order's answer is written before its deadline", c.OrderTimeout, maxServiceTimeout))
	}
	if err := redisurl.Check(c.RedisURL.Reveal()); err != nil {
		errs = append(errs, fmt.Errorf("REDIS_URL %s: %w", c.RedisURL, err))
	}
	errs = append(errs, c.HTTP.Validate(), c.Telemetry.Validate())
	return errors.Join(errs...)
}

// Settings is what libs/service's runner reads of the configuration.
func (c Config) Settings() service.Settings {
	return service.Settings{HTTP: c.HTTP, Runtime: c.Runtime, Telemetry: c.Telemetry}
}
