package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunServesUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// The gateway starts without its peers: they are called per request.
	env := map[string]string{"HTTP_ADDR": addr, "ACCOUNTS_URL": "http://127.0.0.1:1", "CATALOGUE_URL": "http://127.0.0.1:1", "LOG_LEVEL": "error"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, io.Discard) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
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
}
