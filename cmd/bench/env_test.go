package main

import (
	"context"
	"strings"
	"testing"

	"github.com/esimplatform/esim/cmd/internal/platform"
	libconfig "github.com/esimplatform/esim/libs/config"
	accounts "github.com/esimplatform/esim/services/accounts/server"
	catalogue "github.com/esimplatform/esim/services/catalogue/server"
	gateway "github.com/esimplatform/esim/services/gateway/server"
)

// Every setting the benchmark adds is one its service accepts: a gateway
// that refused its rate limit stopped `make bench` at start, and no other
// test starts the platform the way the benchmark does.
func TestBenchSettingsAreAcceptedByTheServices(t *testing.T) {
	// What the launcher sets itself, so that the configs are whole.
	launcher := map[string]string{
		"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/esim_accounts", "ACCOUNTS_URL": "http://127.0.0.1:8081",
		"CATALOGUE_URL": "http://127.0.0.1:8082", "AUTH_CACHE_SECRET": strings.Repeat("s", 32),
	}
	parse := map[string]func(libconfig.Getenv) error{
		platform.Gateway: func(g libconfig.Getenv) error {
			var c gateway.Config
			return libconfig.Parse(context.Background(), g, &c)
		},
		platform.Accounts: func(g libconfig.Getenv) error {
			var c accounts.Config
			return libconfig.Parse(context.Background(), g, &c)
		},
		platform.Catalogue: func(g libconfig.Getenv) error {
			var c catalogue.Config
			return libconfig.Parse(context.Background(), g, &c)
		},
	}
	for svc, settings := range benchEnv {
		env := map[string]string{}
		for k, v := range launcher {
			env[k] = v
		}
		for _, kv := range settings {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		p, ok := parse[svc]
		if !ok {
			t.Fatalf("no parser for %s", svc)
		}
		if err := p(func(k string) string { return env[k] }); err != nil {
			t.Errorf("%s refuses the benchmark's settings %q: %v", svc, settings, err)
		}
	}
}
