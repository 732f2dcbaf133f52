package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
)

// Config is everything the accounts service reads from its environment.
// The Helm chart sets exactly these variables (checked by charts tests).
type Config struct {
	HTTP    httpserver.Config
	Runtime config.Runtime
	// AllowedHosts are names the service answers to besides loopback, IP
	// addresses and cluster names (httpserver.InternalHost): a DNS name
	// of its own, when it has one.
	AllowedHosts []string `env:"ALLOWED_HOSTS"`
	// DatabaseURL is a postgres:// URL; its password never shows.
	DatabaseURL config.SecretURL `env:"DATABASE_URL, required"`
	// Callers are the tokens the Twirp API accepts, as
	// name:sha256-hex entries (libs/internalauth).
	Callers internalauth.Callers `env:"CALLERS, required"`
	// SessionTTL is how long a portal sign-in lasts; ChangePassword and
	// SignOut end sessions sooner.
	SessionTTL time.Duration `env:"SESSION_TTL, default=12h"`
	// InviteTTL is how long an invite link (esimctl users invite) can be
	// accepted.
	InviteTTL time.Duration `env:"INVITE_TTL, default=72h"`
	Telemetry telemetry.Config
}

// The bounds of SESSION_TTL and INVITE_TTL: under five minutes a user
// could not finish a task, and past 30 days a stolen token or a forgotten
// link outlives any reason to keep it.
const (
	minTTL = 5 * time.Minute
	maxTTL = 720 * time.Hour
)

// Validate checks what the types alone cannot; config.Parse runs it, and
// the deployment checks run it on what the charts render.
func (c Config) Validate() error {
	var database error
	if err := postgres.ValidateURL(c.DatabaseURL.Reveal()); err != nil {
		database = fmt.Errorf("DATABASE_URL: %w", err)
	}
	var ttls []error
	for _, ttl := range []struct {
		name string
		d    time.Duration
	}{{"SESSION_TTL", c.SessionTTL}, {"INVITE_TTL", c.InviteTTL}} {
		if ttl.d < minTTL || ttl.d > maxTTL {
			ttls = append(ttls, fmt.Errorf("%s %s: must be between %s and %s", ttl.name, ttl.d, minTTL, maxTTL))
		}
	}
	return errors.Join(database, errors.Join(ttls...), c.HTTP.Validate(), httpserver.CheckAllowedHosts(c.AllowedHosts), c.Telemetry.Validate())
}

// Settings is what libs/service's runner reads of the configuration.
func (c Config) Settings() service.Settings {
	return service.Settings{HTTP: c.HTTP, Runtime: c.Runtime, Telemetry: c.Telemetry}
}
