package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

// env serves vars, with a valid CALLERS unless vars sets one.
func env(vars map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := vars[k]; ok || k != "CALLERS" {
			return v
		}
		return internalauthtest.CallersEnv()
	}
}

// TestRunServesUntilCancelled runs the program as a process would, on
// free ports, with /metrics on a port of its own as the charts run it, and
// stops it the way SIGTERM does.
func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, listeners := telemetrytest.Listening()

	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"accounts"}, env(map[string]string{
			"DATABASE_URL":  pgtest.NewDatabase(t),
			"HTTP_ADDR":     "127.0.0.1:0",
			"METRICS_ADDR":  "127.0.0.1:0",
			"ALLOWED_HOSTS": "accounts.internal.example.com",
		}), logs)
		logs.Close()
	}()

	api, metrics := listeners.Wait(t, done, true)
	// The API's port serves the probes and not /metrics, which whoever
	// may scrape could otherwise reach the API through.
	for url, want := range map[string]int{
		"http://" + api + "/readyz":      http.StatusOK,
		"http://" + api + "/metrics":     http.StatusNotFound,
		"http://" + metrics + "/metrics": http.StatusOK,
		"http://" + metrics + "/readyz":  http.StatusNotFound,
	} {
		code, body := httpservertest.Get(t, url)
		if code != want {
			t.Errorf("GET %s = %d, want %d", url, code, want)
		}
		if want == http.StatusOK && strings.HasSuffix(url, "/metrics") && !strings.Contains(body, "go_goroutines") {
			t.Errorf("GET %s is not the service's metrics: %.200s", url, body)
		}
	}

	// An unauthenticated API answers only names that point inside, and
	// the ones ALLOWED_HOSTS adds: not a rebinding page's.
	for host, want := range map[string]int{"rebind.attacker.example": http.StatusMisdirectedRequest, "accounts.internal.example.com": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+api+"/readyz", nil)
		req.Host = host
		if code, _ := httpservertest.Do(t, req); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}

	cancel()
	httpservertest.Returned(t, done, 30*time.Second)
}

func TestRunRejectsBadStarts(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		vars map[string]string
		want string
	}{
		"no database": {[]string{"accounts"}, nil, "DATABASE_URL"},
		"no callers":  {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": ""}, "CALLERS"},
		"a caller without its token's hash": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": "gateway"},
			"CALLERS: entry 1: want name:sha256-hex"},
		"bad log level": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		"arguments":     {[]string{"accounts", "--port=1"}, nil, "--port=1"},
		// Both at once, before connecting, the password masked.
		"bad database url and address": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://u:hunter2@h:port/x", "HTTP_ADDR": "accounts"},
			"DATABASE_URL: want postgres://user:password@host:5432/database (cannot parse `postgres://u:xxxxx@h:port/x`: invalid port)\n" +
				`HTTP_ADDR "accounts": want [host]:port`},
		"no grace": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SHUTDOWN_TIMEOUT": "0s"}, "SHUTDOWN_TIMEOUT 0s: must be positive"},
		"an allowed host with a port": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "ALLOWED_HOSTS": "accounts.example.com:8081"},
			`ALLOWED_HOSTS entry "accounts.example.com:8081": want a whole bare DNS name`},
		"metrics on the API's port": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "HTTP_ADDR": ":8081", "METRICS_ADDR": ":8081"},
			`METRICS_ADDR ":8081" is HTTP_ADDR too`},
		"everything bad at once": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SHUTDOWN_TIMEOUT": "-5s", "LOG_LEVEL": "loud",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "SHUTDOWN_TIMEOUT -5s: must be positive"},
		"a session of a minute": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SESSION_TTL": "1m"},
			"SESSION_TTL 1m0s: must be between 5m0s and 720h0m0s"},
		"an invite of a year": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "INVITE_TTL": "8760h"},
			"INVITE_TTL 8760h0m0s: must be between 5m0s and 720h0m0s"},
		"a duration without unit": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SHUTDOWN_TIMEOUT": "5"},
			`SHUTDOWN_TIMEOUT: time: missing unit in duration "5"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), tc.args, env(tc.vars), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run = %v, want an error mentioning %s", err, tc.want)
			}
			if name == "everything bad at once" && (!strings.Contains(err.Error(), "LOG_LEVEL") || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT")) {
				t.Errorf("run = %v, want every bad variable named", err)
			}
		})
	}
}
