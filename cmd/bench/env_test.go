package main

import (
	"context"
	"strings"
	"testing"

	"github.com/esimplatform/esim/cmd/internal/platform"
	libconfig "github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/telemetry"
	gateway "github.com/esimplatform/esim/services/gateway/server"
	webhook "github.com/esimplatform/esim/services/webhook/server"
)

// Every setting the benchmark adds is one its service accepts: a gateway
// that refused its rate limit would stop `make bench` at start, and no
// other test starts the platform the way the benchmark does.
func TestBenchSettingsAreAcceptedByTheServices(t *testing.T) {
	env := benchEnv([]string{platform.Accounts, platform.Gateway, webhookService}, "127.0.0.1:40000")
	getenv := func(settings []string, launcher map[string]string) libconfig.Getenv {
		vars := map[string]string{}
		for k, v := range launcher {
			vars[k] = v
		}
		for _, kv := range settings {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		return func(k string) string { return vars[k] }
	}
	// What the launcher sets itself, so that the gateway's config is whole.
	launcher := map[string]string{
		"ACCOUNTS_URL": "http://127.0.0.1:8081", "CATALOGUE_URL": "http://127.0.0.1:8082", "ORDERING_URL": "http://127.0.0.1:8084",
		"WALLET_URL": "http://127.0.0.1:8083", "WEBHOOK_URL": "http://127.0.0.1:8085", "AUTH_CACHE_SECRET": strings.Repeat("s", 32), "INTERNAL_TOKEN": strings.Repeat("t", 32),
	}
	var gw gateway.Config
	if err := libconfig.Parse(context.Background(), getenv(env[platform.Gateway], launcher), &gw); err != nil {
		t.Errorf("the gateway refuses the benchmark's settings %q: %v", env[platform.Gateway], err)
	}
	var hooks webhook.Config
	webhookLauncher := map[string]string{"DATABASE_URL": "postgres://u@h/webhook", "KAFKA_BROKERS": "127.0.0.1:9092",
		"CALLERS": "operator:" + strings.Repeat("0", 64), "SECRETS_KEY": "ZGV2LW9ubHktd2ViaG9vay1zZWNyZXRzLWtleS0wMDA="}
	if err := libconfig.Parse(context.Background(), getenv(env[webhookService], webhookLauncher), &hooks); err != nil || len(hooks.SandboxPrivateEndpoints) != 1 {
		t.Errorf("the webhook service refuses the benchmark's settings %q: %v", env[webhookService], err)
	}
	var tel telemetry.Config
	if err := libconfig.Parse(context.Background(), getenv(env[platform.Accounts], nil), &tel); err != nil || tel.LogLevel != "warn" {
		t.Errorf("the benchmark's settings %q: log level %q, %v", env[platform.Accounts], tel.LogLevel, err)
	}
}
