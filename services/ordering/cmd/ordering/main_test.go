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
)

// valid is a configuration that starts, but for DATABASE_URL; the
// catalogue and the wallet are never called when nothing is ordered, and
// Kafka, where nothing listens, need not be up.
func valid() map[string]string {
	return map[string]string{
		"DATABASE_URL":   "postgres://x/y",
		"CALLERS":        internalauthtest.CallersEnv(),
		"INTERNAL_TOKEN": internalauthtest.Token(internalauth.Ordering),
		"CATALOGUE_URL":  "http://127.0.0.1:1",
		"WALLET_URL":     "http://127.0.0.1:1",
		"QR_BASE_URL":    "http://127.0.0.1:8080/qr",
		"KAFKA_BROKERS":  "127.0.0.1:1",
	}
}

// env serves valid() with vars over it; a var set to "-" is unset.
func env(vars map[string]string) func(string) string {
	all := valid()
	for k, v := range vars {
		all[k] = v
		if v == "-" {
			delete(all, k)
		}
	}
	return func(k string) string { return all[k] }
}

// TestRunServesUntilCancelled runs the program as a process would, on
// free ports, with /metrics on a port of its own as the charts run it, and
// stops it the way SIGTERM does. Kafka is down throughout: ordering is
// ready all the same, and stops while its relay retries.
func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, listeners := telemetrytest.Listening()

	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"ordering"}, env(map[string]string{
			"DATABASE_URL":      pgtest.NewDatabase(t),
			"HTTP_ADDR":         "127.0.0.1:0",
			"METRICS_ADDR":      "127.0.0.1:0",
			"RECOVERY_INTERVAL": "50ms",
		}), logs)
		logs.Close()
	}()

	api, metrics := listeners.Wait(t, done, true)
	for url, want := range map[string]int{
		"http://" + api + "/readyz":      http.StatusOK,
		"http://" + api + "/metrics":     http.StatusNotFound,
		"http://" + metrics + "/metrics": http.StatusOK,
	} {
		if code, _ := httpservertest.Get(t, url); code != want {
			t.Errorf("GET %s = %d, want %d", url, code, want)
		}
	}
	// The Twirp API answers only callers with a token.
	req, _ := http.NewRequest(http.MethodPost, "http://"+api+"/twirp/esim.ordering.v1.Ordering/ListOrders", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if code, _ := httpservertest.Do(t, req); code != http.StatusUnauthorized {
		t.Errorf("ListOrders without a token = %d, want 401", code)
	}

	cancel()
	httpservertest.Returned(t, done, 30*time.Second)
}

func TestRunRejectsBadStarts(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		vars map[string]string
		want []string
	}{
		"arguments":        {[]string{"ordering", "--port=1"}, nil, []string{"--port=1"}},
		"no database":      {nil, map[string]string{"DATABASE_URL": "-"}, []string{"DATABASE_URL is required"}},
		"no callers":       {nil, map[string]string{"CALLERS": "-"}, []string{"CALLERS is required"}},
		"callers mangled":  {nil, map[string]string{"CALLERS": "gateway"}, []string{"CALLERS: entry 1: want name:sha256-hex"}},
		"no token":         {nil, map[string]string{"INTERNAL_TOKEN": "-"}, []string{"INTERNAL_TOKEN is required"}},
		"a short token":    {nil, map[string]string{"INTERNAL_TOKEN": "hunter2"}, []string{"INTERNAL_TOKEN: 7 bytes; want at least 32"}},
		"no catalogue":     {nil, map[string]string{"CATALOGUE_URL": "-"}, []string{"CATALOGUE_URL is required"}},
		"no wallet":        {nil, map[string]string{"WALLET_URL": "-"}, []string{"WALLET_URL is required"}},
		"no QR base":       {nil, map[string]string{"QR_BASE_URL": "-"}, []string{"QR_BASE_URL is required"}},
		"a bare host":      {nil, map[string]string{"WALLET_URL": "wallet:8083"}, []string{"WALLET_URL", "is not an http:// or https:// base URL"}},
		"a QR base query":  {nil, map[string]string{"QR_BASE_URL": "http://x/qr?token=1"}, []string{"QR_BASE_URL"}},
		"order timeout 0":  {nil, map[string]string{"ORDER_TIMEOUT": "0s"}, []string{"ORDER_TIMEOUT 0s: must be above 0 and at most 50s"}},
		"order timeout 2m": {nil, map[string]string{"ORDER_TIMEOUT": "2m"}, []string{"ORDER_TIMEOUT 2m0s"}},
		"service timeout past the order's": {nil, map[string]string{"SERVICE_TIMEOUT": "10s", "ORDER_TIMEOUT": "5s"},
			[]string{"SERVICE_TIMEOUT 10s: must be above 0 and at most ORDER_TIMEOUT (5s)"}},
		"recovery interval 0":        {nil, map[string]string{"RECOVERY_INTERVAL": "0s"}, []string{"RECOVERY_INTERVAL 0s: must be positive"}},
		"recovery after <0":          {nil, map[string]string{"RECOVERY_AFTER": "-1s"}, []string{"RECOVERY_AFTER -1s: must be positive"}},
		"a $ in the SM-DP+":          {nil, map[string]string{"SANDBOX_SMDP_ADDRESS": "smdp$x.invalid"}, []string{`SANDBOX_SMDP_ADDRESS "smdp$x.invalid": want a lower-case DNS name`}},
		"an SM-DP+ URL":              {nil, map[string]string{"SANDBOX_SMDP_ADDRESS": "https://smdp.example.com"}, []string{"SANDBOX_SMDP_ADDRESS"}},
		"a single-label SM-DP+":      {nil, map[string]string{"SANDBOX_SMDP_ADDRESS": "smdp"}, []string{"SANDBOX_SMDP_ADDRESS"}},
		"SM-DP+ files without a URL": {nil, map[string]string{"SMDP_CA_FILE": "/ca.crt"}, []string{"SMDP_CA_FILE is set but SMDP_URL is not"}},
		"an http SM-DP+":             {nil, map[string]string{"SMDP_URL": "http://smdp", "SMDP_CERT_FILE": "c", "SMDP_KEY_FILE": "k", "SMDP_CA_FILE": "ca", "SMDP_PROFILE_TYPES": "*=t"}, []string{`SMDP_URL "http://smdp": want an https:// URL`}},
		"an SM-DP+ without certificates": {nil, map[string]string{"SMDP_URL": "https://smdp", "SMDP_PROFILE_TYPES": "*=t"},
			[]string{"SMDP_CERT_FILE: required with SMDP_URL", "SMDP_KEY_FILE: required", "SMDP_CA_FILE: required"}},
		"an SM-DP+ without profile types": {nil, map[string]string{"SMDP_URL": "https://smdp", "SMDP_CERT_FILE": "c", "SMDP_KEY_FILE": "k", "SMDP_CA_FILE": "ca"}, []string{"SMDP_PROFILE_TYPES: empty"}},
		"an SM-DP+ timeout past the provider's": {nil, map[string]string{"SMDP_URL": "https://smdp", "SMDP_CERT_FILE": "c", "SMDP_KEY_FILE": "k", "SMDP_CA_FILE": "ca", "SMDP_PROFILE_TYPES": "*=t", "SMDP_TIMEOUT": "40s"},
			[]string{"SMDP_TIMEOUT 40s: must be above 0 and at most PROVIDER_TIMEOUT (15s)"}},
		"a provider budget leaving no time to refund": {nil, map[string]string{"PROVIDER_TIMEOUT": "25s"},
			[]string{"PROVIDER_TIMEOUT 25s: must be above 0 and at most ORDER_TIMEOUT - 2 x SERVICE_TIMEOUT - SMDP_CANCEL_BUDGET (15s)"}},
		"an account allowed most of a replica's orders": {nil, map[string]string{"ORDER_CONCURRENCY": "8", "ORDERS_IN_FLIGHT_PER_ACCOUNT": "5"},
			[]string{"ORDERS_IN_FLIGHT_PER_ACCOUNT 5: want 1 to half of ORDER_CONCURRENCY (4)"}},
		"more orders at once than the pool holds": {nil, map[string]string{"ORDER_CONCURRENCY": "20"},
			[]string{"ORDER_CONCURRENCY 20 needs a pool of at least 28 connections"}},
		"an unreadable client certificate": {nil, map[string]string{"SMDP_URL": "https://smdp", "SMDP_CERT_FILE": "/nonexistent/c.crt", "SMDP_KEY_FILE": "/nonexistent/c.key", "SMDP_CA_FILE": "/nonexistent/ca.crt", "SMDP_PROFILE_TYPES": "*=t"},
			[]string{"SM-DP+ client", "/nonexistent/"}},
		"ES2+ files without an address": {nil, map[string]string{"ES2PLUS_CLIENT_CA_FILE": "/ca.crt"}, []string{"ES2PLUS_CLIENT_CA_FILE is set but ES2PLUS_ADDR is not"}},
		"an ES2+ listener without certificates": {nil, map[string]string{"ES2PLUS_ADDR": ":8443"},
			[]string{"ES2PLUS_CERT_FILE: required with ES2PLUS_ADDR", "ES2PLUS_KEY_FILE: required", "ES2PLUS_CLIENT_CA_FILE: required"}},
		"an ES2+ address that is no address": {nil, map[string]string{"ES2PLUS_ADDR": "ordering", "ES2PLUS_CERT_FILE": "c", "ES2PLUS_KEY_FILE": "k", "ES2PLUS_CLIENT_CA_FILE": "ca"},
			[]string{`ES2PLUS_ADDR "ordering": want [host]:port`}},
		"the ES2+ listener on the API's port": {nil, map[string]string{"HTTP_ADDR": ":8080", "ES2PLUS_ADDR": ":8080", "ES2PLUS_CERT_FILE": "c", "ES2PLUS_KEY_FILE": "k", "ES2PLUS_CLIENT_CA_FILE": "ca"},
			[]string{`ES2PLUS_ADDR ":8080" is HTTP_ADDR too`}},
		"an unreadable ES2+ certificate": {nil, map[string]string{"ES2PLUS_ADDR": "127.0.0.1:0", "ES2PLUS_CERT_FILE": "/nonexistent/s.crt", "ES2PLUS_KEY_FILE": "/nonexistent/s.key", "ES2PLUS_CLIENT_CA_FILE": "/nonexistent/ca.crt"},
			[]string{"ES2+ listener", "/nonexistent/"}},
		"network files without a URL": {nil, map[string]string{"NETWORK_CERT_FILE": "/c.crt"}, []string{"NETWORK_CERT_FILE is set but NETWORK_URL is not"}},
		"an http network":             {nil, map[string]string{"NETWORK_URL": "http://network", "NETWORK_CERT_FILE": "c", "NETWORK_KEY_FILE": "k", "NETWORK_CA_FILE": "ca"}, []string{`NETWORK_URL "http://network": want an https:// URL`}},
		"a network without certificates": {nil, map[string]string{"NETWORK_URL": "https://network"},
			[]string{"NETWORK_CERT_FILE: required with NETWORK_URL", "NETWORK_KEY_FILE: required", "NETWORK_CA_FILE: required"}},
		"a network timeout past the provider's": {nil, map[string]string{"NETWORK_URL": "https://network", "NETWORK_CERT_FILE": "c", "NETWORK_KEY_FILE": "k", "NETWORK_CA_FILE": "ca", "NETWORK_TIMEOUT": "40s"},
			[]string{"NETWORK_TIMEOUT 40s: must be above 0 and at most PROVIDER_TIMEOUT (15s)"}},
		"an unreadable network certificate": {nil, map[string]string{"NETWORK_URL": "https://network", "NETWORK_CERT_FILE": "/nonexistent/c.crt", "NETWORK_KEY_FILE": "/nonexistent/c.key", "NETWORK_CA_FILE": "/nonexistent/ca.crt"},
			[]string{"network client", "/nonexistent/"}},
		"no Kafka":             {nil, map[string]string{"KAFKA_BROKERS": "-"}, []string{"KAFKA_BROKERS is required"}},
		"a Kafka URL":          {nil, map[string]string{"KAFKA_BROKERS": "kafka://k:9092"}, []string{`KAFKA_BROKERS: "kafka://k:9092" is not host:port`}},
		"a topic with a space": {nil, map[string]string{"KAFKA_TOPIC": "esim orders"}, []string{`KAFKA_TOPIC "esim orders"`}},
		"relay interval 0":     {nil, map[string]string{"RELAY_INTERVAL": "0s"}, []string{"RELAY_INTERVAL 0s: must be positive"}},
		"no retention":         {nil, map[string]string{"OUTBOX_RETENTION": "0s"}, []string{"OUTBOX_RETENTION 0s: must be positive"}},
		"everything bad at once": {nil, map[string]string{"DATABASE_URL": "postgres://u:hunter2@h:port/x", "INTERNAL_TOKEN": "short",
			"ORDER_TIMEOUT": "0s", "RECOVERY_INTERVAL": "-1s", "SMDP_URL": "x", "SANDBOX_SMDP_ADDRESS": "-x-", "HTTP_ADDR": "ordering",
			"KAFKA_BROKERS": "k", "RELAY_INTERVAL": "0s"},
			[]string{"DATABASE_URL", "INTERNAL_TOKEN", "ORDER_TIMEOUT", "SERVICE_TIMEOUT", "RECOVERY_INTERVAL", "SMDP_URL", "SANDBOX_SMDP_ADDRESS", "HTTP_ADDR",
				"KAFKA_BROKERS", "RELAY_INTERVAL"}},
	} {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				args = []string{"ordering"}
			}
			err := run(context.Background(), args, env(tc.vars), io.Discard)
			if err == nil {
				t.Fatal("run succeeded")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("run = %v\nwant it to mention %s", err, want)
				}
			}
			for _, secret := range []string{"hunter2", internalauthtest.Token(internalauth.Ordering)} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("run's error reveals a secret: %v", err)
				}
			}
		})
	}
}
