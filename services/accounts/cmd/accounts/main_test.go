package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestRunServesUntilCancelled runs the program as a process would, on a
// free port, and stops it the way SIGTERM does.
func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, addr := telemetrytest.Listening()

	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"accounts"}, env(map[string]string{
			"DATABASE_URL": pgtest.NewDatabase(t),
			"HTTP_ADDR":    "127.0.0.1:0",
		}), logs)
		logs.Close()
	}()

	select {
	case a := <-addr:
		resp, err := http.Get("http://" + a + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz = %d, want 200", resp.StatusCode)
		}
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not start listening within 30s")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30s of cancellation")
	}
}

func TestRunRejectsBadStarts(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		vars map[string]string
		want string
	}{
		"no database":   {[]string{"accounts"}, nil, "DATABASE_URL"},
		"bad log level": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		"arguments":     {[]string{"accounts", "--port=1"}, nil, "--port=1"},
		"no grace":      {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SHUTDOWN_TIMEOUT": "0s"}, "SHUTDOWN_TIMEOUT 0s: must be positive"},
		"everything bad at once": {[]string{"accounts"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SHUTDOWN_TIMEOUT": "-5s", "LOG_LEVEL": "loud",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "SHUTDOWN_TIMEOUT -5s: must be positive"},
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
