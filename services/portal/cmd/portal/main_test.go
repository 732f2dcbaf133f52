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
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	"github.com/esimplatform/esim/services/portal/portaltest"
)

var testInternalToken = internalauthtest.Token(internalauth.Portal)

func TestRunServesUntilCancelled(t *testing.T) {
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "INTERNAL_TOKEN": testInternalToken, "REDIS_URL": portaltest.RedisURL(),
		"ACCOUNTS_URL": "http://127.0.0.1:1", "WALLET_URL": "http://127.0.0.1:1", "ORDERING_URL": "http://127.0.0.1:1", "WEBHOOK_URL": "http://127.0.0.1:1",
		"PUBLIC_API_URL": "http://127.0.0.1:8080/v1"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, listeners := telemetrytest.Listening()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"portal"}, func(k string) string { return env[k] }, logs)
		_ = logs.Close()
	}()
	addr, _ := listeners.Wait(t, done, false)
	// With accounts down, the sign-in page still renders (it asks nobody),
	// and a page that needs accounts is the plain 500 page.
	if code, body := httpservertest.Get(t, "http://"+addr+"/signin"); code != http.StatusOK || !strings.Contains(body, "Sign in") {
		t.Errorf("/signin = %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/sandbox/", nil)
	req.AddCookie(&http.Cookie{Name: "esim_session", Value: "whatever"})
	if status, body := httpservertest.Do(t, req); status != http.StatusInternalServerError || !strings.Contains(body, "Something went wrong") || !strings.Contains(body, "req_") {
		t.Errorf("with accounts down: %d %.500s", status, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpservertest.Get(t, "http://"+addr+path); code != http.StatusOK {
			t.Errorf("%s = %d %.300s", path, code, body)
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
		"no accounts url":    {map[string]string{"ACCOUNTS_URL": ""}, []string{"ACCOUNTS_URL is required"}},
		"no public api url":  {map[string]string{"PUBLIC_API_URL": ""}, []string{"PUBLIC_API_URL is required"}},
		"no internal token":  {map[string]string{"INTERNAL_TOKEN": ""}, []string{"INTERNAL_TOKEN is required"}},
		"short token":        {map[string]string{"INTERNAL_TOKEN": "hunter2hunter2"}, []string{"INTERNAL_TOKEN: 14 bytes"}},
		"zero email limit":   {map[string]string{"SIGNIN_LIMIT_PER_EMAIL": "0"}, []string{"SIGNIN_LIMIT_PER_EMAIL 0"}},
		"zero address limit": {map[string]string{"SIGNIN_LIMIT_PER_ADDRESS": "0"}, []string{"SIGNIN_LIMIT_PER_ADDRESS 0"}},
		"no window":          {map[string]string{"SIGNIN_LIMIT_WINDOW": "0s"}, []string{"SIGNIN_LIMIT_WINDOW 0s"}},
		"long timeout":       {map[string]string{"SERVICE_TIMEOUT": "1m"}, []string{"SERVICE_TIMEOUT 1m0s"}},
		"bad redis url":      {map[string]string{"REDIS_URL": "x://u:hunter2@h"}, []string{"REDIS_URL x://u:xxxxx@h"}},
		"bad secure cookies": {map[string]string{"SECURE_COOKIES": "maybe"}, []string{"SECURE_COOKIES"}},
		"url without scheme": {map[string]string{"WALLET_URL": "wallet:8083"}, []string{"WALLET_URL"}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			defaults := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "INTERNAL_TOKEN": testInternalToken, "ACCOUNTS_URL": "http://accounts",
				"WALLET_URL": "http://wallet", "ORDERING_URL": "http://ordering", "WEBHOOK_URL": "http://webhook", "PUBLIC_API_URL": "http://127.0.0.1:8080/v1"}
			err := run(ctx, nil, func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return defaults[k]
			}, io.Discard)
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
}
