package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
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
	if err == nil || err.Error() != "DATABASE_URL is required" {
		t.Fatalf("err = %v, want DATABASE_URL named as required", err)
	}
}

func TestEnvVarsListsEveryVariable(t *testing.T) {
	got := config.EnvVars(sample{})
	want := []string{"DATABASE_URL", "HTTP_ADDR", "TIMEOUT"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

type validated struct {
	Timeout time.Duration `env:"TIMEOUT, default=5s"`
	Workers int           `env:"WORKERS, default=4"`
	Debug   bool          `env:"DEBUG"`
	DB      nested        `env:", prefix=DATABASE_"`
}

func (v validated) Validate() error {
	if v.Timeout <= 0 {
		return errors.New("TIMEOUT must be positive")
	}
	return nil
}

// Every variable that does not decode is named, by its environment name, in
// one error; validation waits until all of them decode, so it never judges
// a zero value left by a failed one.
func TestParseNamesEveryBadVariableAtOnce(t *testing.T) {
	env := map[string]string{"TIMEOUT": "5", "WORKERS": "many", "DEBUG": "yes-please"}
	var cfg validated
	err := config.Parse(context.Background(), func(k string) string { return env[k] }, &cfg)
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{`TIMEOUT: time: missing unit in duration "5"`, `WORKERS: strconv.ParseInt: parsing "many"`, `DEBUG: strconv.ParseBool: parsing "yes-please"`, "DATABASE_URL is required"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	for _, field := range []string{"Timeout", "Workers", "Debug", "Value", "must be positive"} {
		if strings.Contains(msg, field) {
			t.Errorf("error %q mentions %q", msg, field)
		}
	}
}

func TestParseValidatesWhatDecoded(t *testing.T) {
	env := map[string]string{"TIMEOUT": "-1s", "DATABASE_URL": "postgres://x"}
	var cfg validated
	err := config.Parse(context.Background(), func(k string) string { return env[k] }, &cfg)
	if err == nil || err.Error() != "TIMEOUT must be positive" {
		t.Fatalf("err = %v, want the config's own validation", err)
	}
	env["TIMEOUT"] = "2s"
	if err := config.Parse(context.Background(), func(k string) string { return env[k] }, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != 2*time.Second || cfg.Workers != 4 || cfg.DB.URL != "postgres://x" {
		t.Fatalf("got %+v", cfg)
	}
}

type withBaseURL struct {
	Accounts config.BaseURL `env:"ACCOUNTS_URL, required"`
}

func TestBaseURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://accounts":              "http://accounts",
		"https://catalogue:8443/base/": "https://catalogue:8443/base",
		"http://127.0.0.1:8081":        "http://127.0.0.1:8081",
	} {
		var cfg withBaseURL
		err := config.Parse(context.Background(), func(string) string { return raw }, &cfg)
		if err != nil || string(cfg.Accounts) != want {
			t.Errorf("ACCOUNTS_URL=%q parsed as %q, %v; want %q", raw, cfg.Accounts, err, want)
		}
	}
	for raw, shown := range map[string]string{
		"127.0.0.1:8081":                  `"127.0.0.1:8081"`,
		"accounts":                        `"accounts"`,
		"ftp://accounts":                  `"ftp://accounts"`,
		"http://":                         `"http://"`,
		"http://accounts?token=s3cr3t":    `"http://accounts?xxxxx"`,
		"http://accounts?":                `"http://accounts?"`,
		"http://accounts#top":             `"http://accounts#xxxxx"`,
		"http:accounts":                   `"http:accounts"`,
		"http://admin:hunter2@accounts?q": `"http://admin:xxxxx@accounts?xxxxx"`,
		"http:admin:hunter2@accounts":     "(not shown: it may hold a password)",
		"http:/admin:hunter2@accounts":    "(not shown: it may hold a password)",
		"https:///admin:hunter2@accounts": "(not shown: it may hold a password)",
		"accounts?token=s3cr3t":           "(not shown: it may hold a password)",
		"admin:hunter2@accounts:8081":     "(not shown: it may hold a password)",
		"http://admin:hunter2@acc ounts":  "(not shown: it may hold a password)",
	} {
		var cfg withBaseURL
		err := config.Parse(context.Background(), func(string) string { return raw }, &cfg)
		want := "ACCOUNTS_URL: " + shown + " is not an http:// or https:// base URL with a host and no query"
		if err == nil || err.Error() != want {
			t.Errorf("ACCOUNTS_URL=%q: %v, want %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ACCOUNTS_URL=%q: the error shows a secret: %q", raw, err)
		}
	}
}

type withRuntime struct {
	Runtime config.Runtime
}

// parseRuntime parses the runtime settings with one variable set.
func parseRuntime(name, raw string) (config.Runtime, error) {
	var cfg withRuntime
	err := config.Parse(context.Background(), func(k string) string {
		if k == name {
			return raw
		}
		return ""
	}, &cfg)
	return cfg.Runtime, err
}

func TestRuntimeGCPercent(t *testing.T) {
	for raw, want := range map[string]config.GCPercent{"": 400, "100": 100, "0": 0, "off": -1} {
		if r, err := parseRuntime("GOGC", raw); err != nil || r.GCPercent != want {
			t.Errorf("GOGC=%q parsed as %d, %v; want %d", raw, r.GCPercent, err, want)
		}
	}
	for _, raw := range []string{"-5", "fast", "50%", "OFF"} {
		if _, err := parseRuntime("GOGC", raw); err == nil || !strings.HasPrefix(err.Error(), "GOGC: ") {
			t.Errorf("GOGC=%q: %v, want an error naming GOGC", raw, err)
		}
	}
	// Apply sets the collector's target; restore the test binary's own.
	config.Runtime{GCPercent: 250}.Apply()
	if previous := debug.SetGCPercent(100); previous != 250 {
		t.Errorf("after Apply the GC target was %d, want 250", previous)
	}
}

func TestRuntimeMemoryLimit(t *testing.T) {
	for raw, want := range map[string]config.MemoryLimit{"": 0, "off": 0, "200MiB": 200 << 20, "1GiB": 1 << 30, "64KiB": 64 << 10, "1048576": 1 << 20, "5000B": 5000} {
		if r, err := parseRuntime("GOMEMLIMIT", raw); err != nil || r.MemoryLimit != want {
			t.Errorf("GOMEMLIMIT=%q parsed as %d, %v; want %d", raw, r.MemoryLimit, err, want)
		}
	}
	for _, raw := range []string{"200MB", "-1", "0", "1.5GiB", "MiB", "lots", "9999999TiB"} {
		if _, err := parseRuntime("GOMEMLIMIT", raw); err == nil || !strings.HasPrefix(err.Error(), "GOMEMLIMIT: ") {
			t.Errorf("GOMEMLIMIT=%q: %v, want an error naming GOMEMLIMIT", raw, err)
		}
	}
	// Apply sets the cap; restore the test binary's own.
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	config.Runtime{GCPercent: 100, MemoryLimit: 200 << 20}.Apply()
	if got := debug.SetMemoryLimit(-1); got != 200<<20 {
		t.Errorf("after Apply the memory limit was %d, want %d", got, 200<<20)
	}
}

var badVerbs = "%d %x %t %d %w %p %w"

// shownAnyWay is value, and cfg the struct holding it, as a mistake could
// show them: printed with any verb, wrapped in an error, logged, encoded.
func shownAnyWay(t *testing.T, value, cfg any) []string {
	t.Helper()
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "value", value, "cfg", cfg)
	asJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		fmt.Sprint(value), fmt.Sprintf("%v %+v %#v %s %q", cfg, cfg, cfg, value, value),
		// Verbs a string does not take print the value on fmt's bad-verb
		// path, which skips String (a variable, so vet lets the mistake
		// be made).
		fmt.Sprintf(badVerbs, value, value, cfg, cfg, value, value, cfg), fmt.Errorf(badVerbs, value, value, cfg, cfg, value, value, cfg).Error(),
		fmt.Errorf("bad value %v", value).Error(), logged.String(), string(asJSON),
	}
}

// A Secret that reaches a log line, an error or JSON by mistake, alone or
// inside its config struct, shows as "[redacted]".
func TestSecretsNeverShow(t *testing.T) {
	var cfg struct {
		Key config.Secret `env:"KEY, required"`
	}
	if err := config.Parse(context.Background(), func(k string) string {
		return map[string]string{"KEY": "hunter2-hunter2"}[k]
	}, &cfg); err != nil {
		t.Fatal(err)
	}
	if got := string(cfg.Key.Reveal()); got != "hunter2-hunter2" {
		t.Fatalf("Reveal = %q, want the value parsed", got)
	}
	for _, shown := range shownAnyWay(t, cfg.Key, cfg) {
		if strings.Contains(shown, "hunter2") || !strings.Contains(shown, "[redacted]") {
			t.Errorf("%s: shows the secret, or not that it is hidden", shown)
		}
	}
}

func TestSecretURLsShowTheServerButNoPassword(t *testing.T) {
	for _, tc := range []struct{ raw, shown string }{
		{"postgres://app:hunter2@db:5432/accounts?sslmode=require", "postgres://app:xxxxx@db:5432/accounts?xxxxx"},
		{"postgres://app@db/accounts?password=hunter2", "postgres://app@db/accounts?xxxxx"},
		{"redis://:hunter2@cache:6379/0", "redis://:xxxxx@cache:6379/0"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		// Not URLs with a host: only their owner knows where a password sits.
		{"host=db user=app password=hunter2", "[redacted]"},
		{"postgres:///accounts?host=/run/postgresql&password=hunter2", "[redacted]"},
		{"postgres://app:hun%zzter2@db/accounts", "[redacted]"},
		// A password with an unencoded "/" or "#" ends net/url's host early:
		// the rest, password included, would read as path or fragment.
		{"redis://user:1234#hunter2@cache:6379", "[redacted]"},
		{"redis://user:1234/hunter2@cache:6379", "[redacted]"},
		{"redis://:1234/hunter2@cache", "[redacted]"},
		{"postgres://app:pw@db/accounts#hunter2", "postgres://app:xxxxx@db/accounts#xxxxx"},
	} {
		var cfg struct {
			URL config.SecretURL `env:"DATABASE_URL, required"`
		}
		if err := config.Parse(context.Background(), func(k string) string {
			return map[string]string{"DATABASE_URL": tc.raw}[k]
		}, &cfg); err != nil {
			t.Fatal(err)
		}
		if got := cfg.URL.Reveal(); got != tc.raw {
			t.Fatalf("Reveal = %q, want the value parsed", got)
		}
		for _, shown := range shownAnyWay(t, cfg.URL, cfg) {
			if strings.Contains(shown, "hunter2") || strings.Contains(shown, "zzter2") || !strings.Contains(shown, tc.shown) {
				t.Errorf("%s: %s shows a password, or not %s", tc.raw, shown, tc.shown)
			}
		}
	}
	if got := fmt.Sprint(config.SecretURL{}); got != "" {
		t.Errorf("an unset URL shows as %q, want nothing", got)
	}
	if got := config.NewSecretURL("redis://:hunter2@cache/0").Reveal(); got != "redis://:hunter2@cache/0" {
		t.Errorf("NewSecretURL(...).Reveal() = %q", got)
	}
}
