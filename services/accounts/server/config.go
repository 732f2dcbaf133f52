package server

import (
	"time"

	"github.com/esimplatform/esim/libs/telemetry"
)

// Config is everything the accounts service reads from its environment.
// The Helm chart sets exactly these variables (checked by charts tests).
type Config struct {
	HTTPAddr        string        `env:"HTTP_ADDR, default=:8080"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT, default=20s"`
	DatabaseURL     string        `env:"DATABASE_URL, required"`
	Telemetry       telemetry.Config
}
