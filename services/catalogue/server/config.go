package server

import (
	"time"

	"github.com/esimplatform/esim/libs/telemetry"
)

// Config is everything the catalogue service reads from its environment.
// The Helm chart sets exactly these variables (checked by charts tests).
type Config struct {
	HTTPAddr        string        `env:"HTTP_ADDR, default=:8080"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT, default=20s"`
	DatabaseURL     string        `env:"DATABASE_URL, required"`
	// SeedCatalogue upserts the bundled catalogue at start. Idempotent: plan
	// ids are stable, so restarts never duplicate plans.
	SeedCatalogue bool `env:"SEED_CATALOGUE, default=false"`
	Telemetry     telemetry.Config
}
