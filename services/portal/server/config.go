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

// Config is everything the portal reads from its environment.
type Config struct {
	HTTP    httpserver.Config
	Runtime config.Runtime
	// The Twirp base URLs of the services the portal shows and changes.
	AccountsURL config.BaseURL `env:"ACCOUNTS_URL, required"`
	WalletURL   config.BaseURL `env:"WALLET_URL, required"`
	OrderingURL config.BaseURL `env:"ORDERING_URL, required"`
	WebhookURL  config.BaseURL `env:"WEBHOOK_URL, required"`
	// InternalToken is the portal's credential ("portal") for the
	// services it calls; they hold its SHA-256 in their CALLERS.
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"`
	// RedisURL names the Redis of the sign-in and sign-up counters and of
	// new API keys until their page shows them; its password never shows.
	RedisURL config.SecretURL `env:"REDIS_URL, default=redis://127.0.0.1:6379/0"`
	// PublicAPIURL is the partner API's base (http://127.0.0.1:8080/v1),
	// for the curl examples; its origin serves the eSIMs' QR images.
	PublicAPIURL config.BaseURL `env:"PUBLIC_API_URL, required"`
	// SecureCookies marks the session cookie Secure; only a portal served
	// over plain http on a developer's machine (make run) turns it off.
	SecureCookies bool `env:"SECURE_COOKIES, default=true"`
	// ServiceTimeout bounds every call to another service.
	ServiceTimeout time.Duration `env:"SERVICE_TIMEOUT, default=5s"`
	// Sign-in attempts allowed per email and per client address within a
	// window.
	SignInLimitPerEmail   int           `env:"SIGNIN_LIMIT_PER_EMAIL, default=5"`
	SignInLimitPerAddress int           `env:"SIGNIN_LIMIT_PER_ADDRESS, default=20"`
	SignInLimitWindow     time.Duration `env:"SIGNIN_LIMIT_WINDOW, default=15m"`
	// Sign-ups and invite acceptances, successful or not, allowed per
	// client address within a window.
	SignUpLimitPerAddress int           `env:"SIGNUP_LIMIT_PER_ADDRESS, default=10"`
	SignUpLimitWindow     time.Duration `env:"SIGNUP_LIMIT_WINDOW, default=1h"`
	Telemetry             telemetry.Config
}

// maxServiceTimeout keeps a page's few calls in a row (the session, then
// what it shows) within the server's write deadline.
const maxServiceTimeout = (httpserver.WriteTimeout - 10*time.Second) / 2

// Validate checks what the types alone cannot; config.Parse runs it.
func (c Config) Validate() error {
	var errs []error
	if n := len(c.InternalToken.Reveal()); n < internalauth.MinTokenLength {
		errs = append(errs, fmt.Errorf("INTERNAL_TOKEN: %d bytes; want at least %d, such as `openssl rand -base64 32` prints", n, internalauth.MinTokenLength))
	}
	if c.ServiceTimeout <= 0 || c.ServiceTimeout > maxServiceTimeout {
		errs = append(errs, fmt.Errorf("SERVICE_TIMEOUT %s: must be above 0 and at most %s", c.ServiceTimeout, maxServiceTimeout))
	}
	if c.SignInLimitPerEmail < 1 || c.SignInLimitPerEmail > 1_000_000 {
		errs = append(errs, fmt.Errorf("SIGNIN_LIMIT_PER_EMAIL %d: must be from 1 to 1000000", c.SignInLimitPerEmail))
	}
	if c.SignInLimitPerAddress < 1 || c.SignInLimitPerAddress > 1_000_000 {
		errs = append(errs, fmt.Errorf("SIGNIN_LIMIT_PER_ADDRESS %d: must be from 1 to 1000000", c.SignInLimitPerAddress))
	}
	if c.SignInLimitWindow < time.Second || c.SignInLimitWindow > 24*time.Hour {
		errs = append(errs, fmt.Errorf("SIGNIN_LIMIT_WINDOW %s: must be from 1s to 24h", c.SignInLimitWindow))
	}
	if c.SignUpLimitPerAddress < 1 || c.SignUpLimitPerAddress > 1_000_000 {
		errs = append(errs, fmt.Errorf("SIGNUP_LIMIT_PER_ADDRESS %d: must be from 1 to 1000000", c.SignUpLimitPerAddress))
	}
	if c.SignUpLimitWindow < time.Second || c.SignUpLimitWindow > 24*time.Hour {
		errs = append(errs, fmt.Errorf("SIGNUP_LIMIT_WINDOW %s: must be from 1s to 24h", c.SignUpLimitWindow))
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
