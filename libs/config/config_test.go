package config_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/config"
)

type nested struct {
	URL string `env:"URL, required"`
}

type sample struct {
	Addr    string        `env:"HTTP_ADDR, default=:8080"`
	Timeout time.Duration `env:"TIMEOUT, default=5s"`
	DB      nested        `env:", prefix=DATABASE_"`
}

func TestParseAppliesDefaultsAndTreatsBlankAsUnset(t *testing.T) {
	env := map[string]string{"HTTP_ADDR": "", "DATABASE_URL": "postgres://x"}
	var cfg sample
	if err := config.Parse(context.Background(), func(k string) string { return env[k] }, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8080" || cfg.Timeout != 5*time.Second || cfg.DB.URL != "postgres://x" {
		t.Fatalf("got %+v", cfg)
	}
}

func TestParseReportsMissingRequired(t *testing.T) {
	var cfg sample
	err := config.Parse(context.Background(), func(string) string { return "" }, &cfg)
	if err == nil {
		t.Fatal("want an error for the missing DATABASE_URL")
	}
}

func TestEnvVarsListsEveryVariable(t *testing.T) {
	got := config.EnvVars(sample{})
	want := []string{"DATABASE_URL", "HTTP_ADDR", "TIMEOUT"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
