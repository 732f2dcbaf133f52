package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/cmd/internal/loopbacktest"
	"github.com/esimplatform/esim/cmd/internal/services"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// TestWebhooksListenReceivesAndVerifies: listen sets its own URL, and a
// test event sent to it is printed as verified by the public library,
// once per attempt when it answers 500. The webhook service reaches it
// as make run's does: on the one address SANDBOX_PRIVATE_ENDPOINTS lists.
func TestWebhooksListenReceivesAndVerifies(t *testing.T) {
	addr := loopbacktest.FreeAddr(t)
	cfg := webhooktest.Config(t, kafkatest.New(t))
	cfg.TestEndpoints = nil
	cfg.SandboxPrivateEndpoints = []string{addr}
	hookURL := webhooktest.Start(t, cfg)
	env := map[string]string{"ESIM_WEBHOOK_URL": hookURL}
	client := webhooktest.Client(hookURL, internalauth.Operator)
	acct := newAccounts(t, env, 1)[0]
	scope := &webhookv1.Scope{AccountId: acct, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}

	done := make(chan cliResult, 1)
	go func() {
		done <- esimctl(t, env, "webhooks", "listen", "--account", acct, "--env", "sandbox", "--addr", addr,
			"--status", "500", "--count", "3", "--json")
	}()
	// listen sets its URL before it serves: wait for it, then ping.
	eventually(t, 10*time.Second, "listen to set its URL", func() bool {
		e, err := client.GetEndpoint(context.Background(), &webhookv1.GetEndpointRequest{Scope: scope})
		return err == nil && e.GetUrl() == "http://"+addr+"/webhooks"
	})
	ping, err := client.SendTestEvent(context.Background(), &webhookv1.SendTestEventRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	var r cliResult
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("listen --count 3 did not stop after 20 s")
	}
	r.ok(t)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("listen printed %d lines; want one per attempt, 3:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var v receivedView
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if v.ID != ping.GetId() || v.Event != "ping" || !v.Verified || v.Error != nil {
			t.Errorf("listen printed %+v; want ping %s, verified", v, ping.GetId())
		}
	}
	if !strings.Contains(r.stderr, "receiving the sandbox deliveries of account "+acct) {
		t.Errorf("stderr %q does not say where it receives", r.stderr)
	}
	got := webhooktest.WaitForStatus(t, client, ping.GetId(), webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED, 10*time.Second)
	if n := len(got.GetAttempts()); n != 3 || got.GetAttempts()[0].GetStatusCode() != 500 {
		t.Errorf("the event's attempts: %v; want 3 answered 500", got.GetAttempts())
	}

	// Bad flags are usage errors before anything is set.
	esimctl(t, env, "webhooks", "listen", "--account", acct, "--env", "sandbox", "--status", "99").wantError(t, 2, "invalid --status 99")
	esimctl(t, env, "webhooks", "listen", "--account", acct, "--env", "sandbox", "--count", "-1").wantError(t, 2, "invalid --count -1")
}

// listen's default address is the one make run's webhook service lets
// sandbox deliveries reach, and its help says so.
func TestWebhooksListenDefaultsToWhatMakeRunAllows(t *testing.T) {
	path, err := services.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	platform, err := services.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	hooks, ok := platform.Get("webhook")
	if !ok {
		t.Fatal("no webhook service in services.yaml")
	}
	allowed := strings.Split(hooks.Env["SANDBOX_PRIVATE_ENDPOINTS"], ",")
	if !slices.Contains(allowed, defaultListenAddr) {
		t.Errorf("make run's webhook service allows %q; listen's default %s is not among them", allowed, defaultListenAddr)
	}
	help := esimctl(t, nil, "webhooks", "listen", "--help").ok(t).stdout
	for _, want := range []string{"at " + defaultListenAddr + ", the default --addr", "SANDBOX_PRIVATE_ENDPOINTS", `(default "` + defaultListenAddr + `")`} {
		if !strings.Contains(help, want) {
			t.Errorf("listen --help does not say %q:\n%s", want, help)
		}
	}
}
