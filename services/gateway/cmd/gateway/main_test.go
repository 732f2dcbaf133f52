package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

func TestRunServesUntilCancelled(t *testing.T) {
	// The gateway starts without its peers: they are called per request.
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "ACCOUNTS_URL": "http://127.0.0.1:1", "CATALOGUE_URL": "http://127.0.0.1:1"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, listening := telemetrytest.Listening()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"gateway"}, func(k string) string { return env[k] }, logs)
		_ = logs.Close()
	}()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not start listening within 30s")
	}
	// A partner request with the peers down is a clean JSON error, not a hang.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/plans", nil)
	req.Header.Set("Authorization", "Bearer sk_sandbox_x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"internal_error"`) {
		t.Fatalf("with accounts down: %d %s", resp.StatusCode, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop after cancellation")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"no accounts url":    {map[string]string{"CATALOGUE_URL": "http://x"}, []string{"ACCOUNTS_URL is required"}},
		"cache ttl too long": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_TTL": "4s"}, []string{"AUTH_CACHE_TTL 4s"}},
		"cache ttl past 3s":  {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_TTL": "3.2s"}, []string{"AUTH_CACHE_TTL 3.2s"}},
		"zero rate limit":    {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "RATE_LIMIT_PER_MINUTE": "-1"}, []string{"RATE_LIMIT_PER_MINUTE -1"}},
		"bad log level":      {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "LOG_LEVEL": "loud"}, []string{`LOG_LEVEL "loud"`}},
		"no grace":           {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "SHUTDOWN_TIMEOUT": "0s"}, []string{"SHUTDOWN_TIMEOUT 0s"}},
		// Without a scheme every call would fail while the gateway reported
		// itself ready: its readiness checks nothing it calls, by design.
		"service urls without a scheme": {map[string]string{"ACCOUNTS_URL": "127.0.0.1:8081", "CATALOGUE_URL": "http://catalogue?x=1"},
			[]string{`ACCOUNTS_URL "127.0.0.1:8081"`, `CATALOGUE_URL "http://catalogue?x=1"`}},
		"several durations without a unit": {map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "SERVICE_TIMEOUT": "5", "AUTH_CACHE_TTL": "2"},
			[]string{`SERVICE_TIMEOUT: time: missing unit in duration "5"`, `AUTH_CACHE_TTL: time: missing unit in duration "2"`}},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), nil, func(k string) string { return tc.env[k] }, io.Discard)
			if err == nil {
				t.Fatal("run started with a bad configuration")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("run = %q, want it to say %q", err, want)
				}
			}
		})
	}
	env := map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x"}
	if err := run(context.Background(), []string{"gateway", "--port=1"}, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "--port=1") {
		t.Fatalf("run with arguments: %v, want an error naming them", err)
	}
}
