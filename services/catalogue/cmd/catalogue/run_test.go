package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
)

func TestRunServesUntilCancelled(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "DATABASE_URL": dbURL, "SEED_CATALOGUE": "true"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	logs, logw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"catalogue"}, func(k string) string { return env[k] }, logw)
		_ = logw.Close()
		done <- err
	}()

	// The listening address is only known from the log line announcing it.
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addr <- line.Addr
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not start listening within 30s")
	}

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
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

func TestRunRejectsMissingDatabaseURL(t *testing.T) {
	err := run(context.Background(), nil, func(string) string { return "" }, io.Discard)
	if err == nil {
		t.Fatal("run started without DATABASE_URL")
	}
}
