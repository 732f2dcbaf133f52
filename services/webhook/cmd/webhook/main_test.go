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
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// valid is a configuration that starts, but for DATABASE_URL; Kafka need
// not be up.
func valid() map[string]string {
	return map[string]string{
		"DATABASE_URL":  "postgres://x/y",
		"CALLERS":       internalauthtest.CallersEnv(),
		"KAFKA_BROKERS": "127.0.0.1:1",
		"SECRETS_KEY":   webhooktest.NewSecretsKey(),
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
// stops it the way SIGTERM does.
func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs, listeners := telemetrytest.Listening()
	vars := webhooktest.Env(webhooktest.Config(t, kafkatest.New(t)))
	vars["HTTP_ADDR"] = "127.0.0.1:0"
	vars["METRICS_ADDR"] = "127.0.0.1:0"
	vars["ALLOWED_HOSTS"] = "webhook.internal.example.com"

	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"webhook"}, func(k string) string { return vars[k] }, logs)
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
	req, _ := http.NewRequest(http.MethodPost, "http://"+api+"/twirp/esim.webhook.v1.Webhook/ListEvents", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if code, _ := httpservertest.Do(t, req); code != http.StatusUnauthorized {
		t.Errorf("ListEvents without a token = %d, want 401", code)
	}
	if _, err := webhooktest.Client("http://"+api, internalauth.Operator).ListEvents(ctx, &webhookv1.ListEventsRequest{}); err != nil {
		t.Errorf("ListEvents as an operator: %v", err)
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
		"arguments":       {[]string{"webhook", "--port=1"}, nil, []string{"--port=1"}},
		"no database":     {nil, map[string]string{"DATABASE_URL": "-"}, []string{"DATABASE_URL is required"}},
		"no callers":      {nil, map[string]string{"CALLERS": "-"}, []string{"CALLERS is required"}},
		"callers mangled": {nil, map[string]string{"CALLERS": "gateway"}, []string{"CALLERS: entry 1: want name:sha256-hex"}},
		"no brokers":      {nil, map[string]string{"KAFKA_BROKERS": "-"}, []string{"KAFKA_BROKERS is required"}},
		"a broker URL":    {nil, map[string]string{"KAFKA_BROKERS": "kafka://k:9092"}, []string{"KAFKA_BROKERS"}},
		"no secrets key":  {nil, map[string]string{"SECRETS_KEY": "-"}, []string{"SECRETS_KEY is required"}},
		"a short key":     {nil, map[string]string{"SECRETS_KEY": "hunter2"}, []string{"SECRETS_KEY: want the base64 of 32 random bytes"}},
		"a CA file gone":  {nil, map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x", "ENDPOINT_CA_FILE": "/nonexistent/ca.pem"}, []string{"ENDPOINT_CA_FILE", "no such file"}},
		"everything bad at once": {nil, map[string]string{"DATABASE_URL": "postgres://u:hunter2@h:port/x", "SECRETS_KEY": "hunter2",
			"WORKERS": "0", "ATTEMPT_TIMEOUT": "0s", "POLL_INTERVAL": "2h", "SANDBOX_PRIVATE_ENDPOINTS": "127.0.0.0/8", "HTTP_ADDR": "webhook"},
			[]string{"DATABASE_URL", "SECRETS_KEY", "WORKERS", "PER_ENDPOINT_CONCURRENCY", "ATTEMPT_TIMEOUT", "POLL_INTERVAL", "SANDBOX_PRIVATE_ENDPOINTS", "HTTP_ADDR"}},
	} {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				args = []string{"webhook"}
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
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("run's error reveals a secret: %v", err)
			}
		})
	}
}
