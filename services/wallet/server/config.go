package server

import (
	"errors"
	"fmt"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/libs/telemetry"
)

// Config is everything the wallet service reads from its environment.
type Config struct {
	HTTP    httpserver.Config
	Runtime config.Runtime
	// AllowedHosts are names the service answers to besides loopback, IP
	// addresses and cluster names (httpserver.InternalHost): a DNS name
	// of its own, when it has one.
	AllowedHosts []string `env:"ALLOWED_HOSTS"`
	// DatabaseURL is a postgres:// URL; its password never shows.
	DatabaseURL config.SecretURL `env:"DATABASE_URL, required"`
	// Callers are the credentials the service accepts, as "name:sha256-hex"
	// entries (internalauth.ParseCallers): the hashes of the tokens of
	// ordering, the gateway and operators. twirpserver.Policy says which
	// of them may call what.
	Callers   internalauth.Callers `env:"CALLERS, required"`
	Telemetry telemetry.Config
}

// Validate checks what the types alone cannot; config.Parse runs it, and
// the deployment checks run it on what the charts render.
func (c Config) Validate() error {
	var database, callers error
	if err := postgres.ValidateURL(c.DatabaseURL.Reveal()); err != nil {
		database = fmt.Errorf("DATABASE_URL: %w", err)
	}
	// A zero Callers (a Config built in code) would refuse every call.
	if len(c.Callers.Names()) == 0 {
		callers = errors.New("CALLERS: no callers, so every call would be refused")
	}
	return errors.Join(database, callers, c.HTTP.Validate(), httpserver.CheckAllowedHosts(c.AllowedHosts), c.Telemetry.Validate())
}

// Settings is what libs/service's runner reads of the configuration.
func (c Config) Settings() service.Settings {
	return service.Settings{HTTP: c.HTTP, Runtime: c.Runtime, Telemetry: c.Telemetry}
}
