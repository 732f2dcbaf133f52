package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	"github.com/esimplatform/esim/services/gateway/redis/redistest"
)

func TestRunServesUntilCancelled(t *testing.T) {
	// The gateway starts without its peers: they are called per request.
	// /metrics has a port of its own, as the charts run it.
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "METRICS_ADDR": "127.0.0.1:0", "AUTH_CACHE_SECRET": testAuthCacheSecret, "INTERNAL_TOKEN": testInternalToken,
		"ACCOUNTS_URL": "http://127.0.0.1:1", "CATALOGUE_URL": "http://127.0.0.1:1", "ORDERING_URL": "http://127.0.0.1:1", "WALLET_URL": "http://127.0.0.1:1", "WEBHOOK_URL": "http://127.0.0.1:1"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, listeners := telemetrytest.Listening()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"gateway"}, func(k string) string { return env[k] }, logs)
		_ = logs.Close()
	}()
	addr, metricsAddr := listeners.Wait(t, done, true)
	// A partner request with the peers down is a clean JSON error, not a hang.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/plans", nil)
	req.Header.Set("Authorization", "Bearer sk_sandbox_x")
	if status, body := httpservertest.Do(t, req); status != http.StatusInternalServerError || !strings.Contains(body, `"internal_error"`) {
		t.Fatalf("with accounts down: %d %s", status, body)
	}

	// That request was measured, and its metrics are on their own port
	// only: the API's port answers /metrics as an unknown path.
	if code, body := httpservertest.Get(t, "http://"+metricsAddr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "http_server_request_duration_seconds") {
		t.Errorf("metrics port /metrics = %d, lacking the HTTP server metrics:\n%.500s", code, body)
	}
	if code, body := httpservertest.Get(t, "http://"+addr+"/metrics"); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Errorf("API port /metrics = %d %.300s, want the API's 404", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpservertest.Get(t, "http://"+addr+path); code != http.StatusOK {
			t.Errorf("API port %s = %d %.300s", path, code, body)
		}
	}

	cancel()
	httpservertest.Returned(t, done, 30*time.Second)
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"no accounts url":                         {map[string]string{"CATALOGUE_URL": "http://x"}, []string{"ACCOUNTS_URL is required"}},
		"no ordering url":                         {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "ORDERING_URL": ""}, []string{"ORDERING_URL is required"}},
		"order timeout past the write deadline":   {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "ORDER_TIMEOUT": "40s"}, []string{"ORDER_TIMEOUT 40s: must be above 0 and at most 25s"}},
		"cache ttl too long":                      {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_TTL": "4s"}, []string{"AUTH_CACHE_TTL 4s"}},
		"cache ttl past 3s":                       {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_TTL": "3.2s"}, []string{"AUTH_CACHE_TTL 3.2s"}},
		"zero rate limit":                         {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "RATE_LIMIT_PER_MINUTE": "-1"}, []string{"RATE_LIMIT_PER_MINUTE -1"}},
		"rate limit one past a billion":           {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "RATE_LIMIT_PER_MINUTE": "1000000001"}, []string{"RATE_LIMIT_PER_MINUTE 1000000001: must be from 1 to 1000000000"}},
		"rate limit past a billion":               {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "RATE_LIMIT_PER_MINUTE": "9223372036854775807"}, []string{"RATE_LIMIT_PER_MINUTE 9223372036854775807: must be from 1 to 1000000000"}},
		"service timeout past the write deadline": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "SERVICE_TIMEOUT": "30s"}, []string{"SERVICE_TIMEOUT 30s: must be above 0 and at most 25s"}},
		"bad log level":                           {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "LOG_LEVEL": "loud"}, []string{`LOG_LEVEL "loud"`}},
		"no grace":                                {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "SHUTDOWN_TIMEOUT": "0s"}, []string{"SHUTDOWN_TIMEOUT 0s"}},
		// Without a scheme every call would fail while the gateway reported
		// itself ready: its readiness checks nothing it calls, by design.
		"service urls without a scheme": {map[string]string{"ACCOUNTS_URL": "127.0.0.1:8081", "CATALOGUE_URL": "http://catalogue?x=1"},
			[]string{`ACCOUNTS_URL: "127.0.0.1:8081" is not an http://`, `CATALOGUE_URL: "http://catalogue?xxxxx" is not an http://`}},
		"no auth cache secret": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_SECRET": ""}, []string{"AUTH_CACHE_SECRET is required"}},
		// The message counts the bytes and never shows them.
		"no internal token": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "INTERNAL_TOKEN": ""}, []string{"INTERNAL_TOKEN is required"}},
		"short internal token": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "INTERNAL_TOKEN": "hunter2hunter2"},
			[]string{"INTERNAL_TOKEN: 14 bytes; want at least 32"}},
		"short auth cache secret": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_SECRET": "hunter2hunter2"},
			[]string{"AUTH_CACHE_SECRET: 14 bytes; want at least 32"}},
		// Every bad setting at once, before anything starts, REDIS_URL's
		// password masked.
		"everything bad at once": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "RATE_LIMIT_PER_MINUTE": "-4",
			"REDIS_URL": "x://u:hunter2@h", "HTTP_ADDR": "nonsense", "METRICS_ADDR": ":99999"},
			[]string{"RATE_LIMIT_PER_MINUTE -4", "REDIS_URL x://u:xxxxx@h: want redis://", "redis: invalid URL scheme: x",
				`HTTP_ADDR "nonsense": want [host]:port`, `METRICS_ADDR ":99999"`}},
		"redis url naming no database": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "REDIS_URL": "redis://:hunter2@redis:6379/first"},
			[]string{`REDIS_URL redis://:xxxxx@redis:6379/first: want redis://`, `invalid database number: "first"`}},
		"several durations without a unit": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "SERVICE_TIMEOUT": "5", "AUTH_CACHE_TTL": "2"},
			[]string{`SERVICE_TIMEOUT: time: missing unit in duration "5"`, `AUTH_CACHE_TTL: time: missing unit in duration "2"`}},
	} {
		t.Run(name, func(t *testing.T) {
			err := runRefused(t, nil, tc.env)
			if err == nil {
				t.Fatal("run started with a bad configuration")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("run = %q, want it to say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("run = %q shows the secret", err)
			}
		})
	}
	env := map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x"}
	if err := runRefused(t, []string{"gateway", "--port=1"}, env); err == nil || !strings.Contains(err.Error(), "--port=1") {
		t.Fatalf("run with arguments: %v, want an error naming them", err)
	}
}

// runRefused runs the gateway with env, expecting it to refuse to start.
// Should a check stop working, the gateway would start: then on a free
// loopback port, not the default :8080 another process may hold, and only
// for a few seconds, so the test fails instead of serving until it times
// out.
func runRefused(t *testing.T, args []string, env map[string]string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defaults := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "AUTH_CACHE_SECRET": testAuthCacheSecret, "INTERNAL_TOKEN": testInternalToken,
		"ORDERING_URL": "http://ordering", "WALLET_URL": "http://wallet", "WEBHOOK_URL": "http://webhook"}
	return run(ctx, args, func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return defaults[k]
	}, io.Discard)
}

// testAuthCacheSecret is AUTH_CACHE_SECRET wherever a test does not set it.
const testAuthCacheSecret = "test-auth-cache-secret-0123456789abcdef"

// testInternalToken is INTERNAL_TOKEN wherever a test does not set it.
var testInternalToken = internalauthtest.Token(internalauth.Gateway)

// TestMain runs the real main instead of the tests when asked to, so a test
// can start the gateway as a process of its own and signal it.
func TestMain(m *testing.M) {
	if os.Getenv("GATEWAY_TEST_RUN_MAIN") == "1" {
		os.Args = os.Args[:1] // the test binary's own flags are not the gateway's
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A second SIGTERM or Ctrl-C while requests drain stops the process at
// once, as an operator pressing Ctrl-C twice expects, instead of being
// swallowed until SHUTDOWN_TIMEOUT has passed.
func TestSecondSignalStopsTheDrain(t *testing.T) {
	// An accounts service that takes calls and never answers keeps a
	// partner request in flight for as long as the test needs.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hung.Close() })
	called := make(chan struct{}, 1)
	go func() {
		for {
			conn, err := hung.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
			select {
			case called <- struct{}{}:
			default:
			}
		}
	}()

	var logs telemetrytest.LogBuffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// The test's own settings win over the caller's environment: a quieter
	// LOG_LEVEL would hide the lines the test waits for.
	cmd.Env = append(os.Environ(), "GATEWAY_TEST_RUN_MAIN=1", "HTTP_ADDR=127.0.0.1:0", "LOG_LEVEL=info", "OTEL_EXPORTER_OTLP_ENDPOINT=",
		"ACCOUNTS_URL=http://"+hung.Addr().String(), "CATALOGUE_URL=http://"+hung.Addr().String(),
		"ORDERING_URL=http://"+hung.Addr().String(), "WALLET_URL=http://"+hung.Addr().String(), "WEBHOOK_URL=http://"+hung.Addr().String(),
		"REDIS_URL="+redistest.URL(), "SERVICE_TIMEOUT=25s", "SHUTDOWN_TIMEOUT=10s", "AUTH_CACHE_SECRET="+testAuthCacheSecret, "INTERNAL_TOKEN="+testInternalToken)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	addr := waitForLog(t, &logs, regexp.MustCompile(`"msg":"listening",.*"addr":"([^"]+)"`))
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/plans", nil)
		req.Header.Set("Authorization", "Bearer sk_sandbox_"+strings.Repeat("a", 32))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatalf("the request never reached accounts; logs:\n%s", logs.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, &logs, regexp.MustCompile(`"msg":"(shutting down)"`))
	// Signal until the process is gone: the first of these may arrive
	// before the drain has handed signals back to their default action.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
				t.Fatalf("the gateway finished its drain (%v) instead of stopping at the second signal; logs:\n%s", err, logs.String())
			}
			return
		case <-tick.C:
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
}

// waitForLog waits for a log line matching re and returns its first group.
func waitForLog(t *testing.T, logs *telemetrytest.LogBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no log line matching %s within 30s; logs:\n%s", re, logs.String())
	return ""
}
