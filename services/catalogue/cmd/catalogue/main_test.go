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

func TestRunServesUntilCancelled(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "DATABASE_URL": dbURL, "SEED_CATALOGUE": "true", "CALLERS": internalauthtest.CallersEnv()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	logw, listeners := telemetrytest.Listening()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"catalogue"}, func(k string) string { return env[k] }, logw)
		_ = logw.Close()
		done <- err
	}()
	addr, _ := listeners.Wait(t, done, false)
	base := "http://" + addr

	// Without METRICS_ADDR, as under make run, /metrics shares the port.
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

	// Not a name a rebinding page could have.
	req, _ := http.NewRequest(http.MethodGet, base+"/readyz", nil)
	req.Host = "rebind.attacker.example"
	if code, _ := httpservertest.Do(t, req); code != http.StatusMisdirectedRequest {
		t.Errorf("Host rebind.attacker.example: %d, want 421", code)
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
		"no database": {[]string{"catalogue"}, nil, "DATABASE_URL"},
		"no callers":  {[]string{"catalogue"}, map[string]string{"DATABASE_URL": "postgres://x/y", "CALLERS": ""}, "CALLERS"},
		"arguments":   {[]string{"catalogue", "--seed"}, map[string]string{"DATABASE_URL": "postgres://x/y"}, "--seed"},
		// Both at once, before connecting, the password masked.
		"bad database url and address": {[]string{"catalogue"}, map[string]string{"DATABASE_URL": "postgres://u:hunter2@h:port/x", "HTTP_ADDR": ":80a"},
			"DATABASE_URL: want postgres://user:password@host:5432/database (cannot parse `postgres://u:xxxxx@h:port/x`: invalid port)\n" +
				`HTTP_ADDR ":80a": want [host]:port`},
		"no grace": {[]string{"catalogue"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SHUTDOWN_TIMEOUT": "-1s"}, "SHUTDOWN_TIMEOUT -1s: must be positive"},
		"seed flag not a bool": {[]string{"catalogue"}, map[string]string{"DATABASE_URL": "postgres://x/y", "SEED_CATALOGUE": "yes-please"},
			`SEED_CATALOGUE: strconv.ParseBool: parsing "yes-please"`},
	} {
		t.Run(name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tc.vars[k]; ok || k != "CALLERS" {
					return v
				}
				return internalauthtest.CallersEnv()
			}
			err := run(context.Background(), tc.args, getenv, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
