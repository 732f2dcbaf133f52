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
	for name, env := range map[string]map[string]string{
		"no accounts url":    {"CATALOGUE_URL": "http://x"},
		"cache ttl too long": {"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_TTL": "4s"},
		"cache ttl past 3s":  {"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "AUTH_CACHE_TTL": "3.2s"},
		"zero rate limit":    {"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "RATE_LIMIT_PER_MINUTE": "-1"},
		"bad log level":      {"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x", "LOG_LEVEL": "loud"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard); err == nil {
				t.Fatal("run started with a bad configuration")
			}
		})
	}
	env := map[string]string{"ACCOUNTS_URL": "http://x", "CATALOGUE_URL": "http://x"}
	if err := run(context.Background(), []string{"gateway", "--port=1"}, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "--port=1") {
		t.Fatalf("run with arguments: %v, want an error naming them", err)
	}
}
