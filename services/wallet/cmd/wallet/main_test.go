package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// callers is a CALLERS value accepting the test tokens of ordering, the
// gateway and operators.
func callers() string {
	return strings.Join([]string{
		internalauth.Entry(internalauth.Ordering, internalauthtest.Token(internalauth.Ordering)),
		internalauth.Entry(internalauth.Gateway, internalauthtest.Token(internalauth.Gateway)),
		internalauth.Entry(internalauth.Operator, internalauthtest.Token(internalauth.Operator)),
	}, ",")
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
		done <- run(ctx, []string{"wallet"}, env(map[string]string{
			"DATABASE_URL":  pgtest.NewDatabase(t),
			"CALLERS":       callers(),
			"HTTP_ADDR":     "127.0.0.1:0",
			"METRICS_ADDR":  "127.0.0.1:0",
			"ALLOWED_HOSTS": "wallet.internal.example.com",
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

	// The API answers only names that point inside, and the ones
	// ALLOWED_HOSTS adds: not a rebinding page's.
	for host, want := range map[string]int{"rebind.attacker.example": http.StatusMisdirectedRequest, "wallet.internal.example.com": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+api+"/readyz", nil)
		req.Host = host
		if code, _ := httpservertest.Do(t, req); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}

	// CALLERS is what the API accepts: the gateway's token reads a balance.
	c := walletv1.NewWalletProtobufClient("http://"+api, internalauthtest.Client(internalauth.Gateway))
	if b, err := c.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: "0195f0c4-1c2d-7abc-8def-0123456789ab", Environment: accountsv1.Environment_ENVIRONMENT_LIVE, Currency: "EUR"}); err != nil || b.GetAmountMinor() != 0 {
		t.Errorf("GetBalance as the gateway = %v, %v", b, err)
	}

	cancel()
	httpservertest.Returned(t, done, 30*time.Second)
}

func TestRunRejectsBadStarts(t *testing.T) {
	good := callers()
	for name, tc := range map[string]struct {
		args []string
		vars map[string]string
		want string
	}{
		"no database":   {[]string{"wallet"}, map[string]string{"CALLERS": good}, "DATABASE_URL"},
		"no callers":    {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y"}, "CALLERS is required"},
		"bad log level": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": good, "LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		"arguments":     {[]string{"wallet", "--port=1"}, nil, "--port=1"},
		// A caller's token where its hash belongs: refused without
		// quoting it.
		"a token for a hash": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": "ordering:" + internalauthtest.Token(internalauth.Ordering)},
			"CALLERS: entry 1 (ordering): want the token's SHA-256 as 64 hex digits"},
		"bad database url and address": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://u:hunter2@h:port/x", "CALLERS": good, "HTTP_ADDR": "wallet"},
			"DATABASE_URL: want postgres://user:password@host:5432/database (cannot parse `postgres://u:xxxxx@h:port/x`: invalid port)\n" +
				`HTTP_ADDR "wallet": want [host]:port`},
		"no grace": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": good, "SHUTDOWN_TIMEOUT": "0s"}, "SHUTDOWN_TIMEOUT 0s: must be positive"},
		"an allowed host with a port": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": good, "ALLOWED_HOSTS": "wallet.example.com:8081"},
			`ALLOWED_HOSTS entry "wallet.example.com:8081": want a whole bare DNS name`},
		"metrics on the API's port": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": good, "HTTP_ADDR": ":8081", "METRICS_ADDR": ":8081"},
			`METRICS_ADDR ":8081" is HTTP_ADDR too`},
		"everything bad at once": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": good, "SHUTDOWN_TIMEOUT": "-5s", "LOG_LEVEL": "loud",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "SHUTDOWN_TIMEOUT -5s: must be positive"},
		"a duration without unit": {[]string{"wallet"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": good, "SHUTDOWN_TIMEOUT": "5"},
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
			if name == "a token for a hash" && strings.Contains(err.Error(), internalauthtest.Token(internalauth.Ordering)) {
				t.Errorf("run = %v quotes the token", err)
			}
		})
	}
}
