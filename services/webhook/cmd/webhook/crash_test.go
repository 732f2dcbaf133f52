package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// attempts reads the event's attempts through the API.
func attempts(t *testing.T, url, id string) []*webhookv1.Attempt {
	t.Helper()
	e, err := webhooktest.Client(url, internalauth.Operator).GetEvent(context.Background(), &webhookv1.GetEventRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return e.GetAttempts()
}

// firstAttemptFailed reports whether the event, if stored yet, has one
// attempt, finished with a 500.
func firstAttemptFailed(url, id string) bool {
	e, err := webhooktest.Client(url, internalauth.Operator).GetEvent(context.Background(), &webhookv1.GetEventRequest{Id: id})
	a := e.GetAttempts()
	return err == nil && len(a) == 1 && a[0].GetError() == "status 500"
}

// TestKilledBetweenAttempts kills the webhook process (SIGKILL) right
// after a delivery's first attempt failed, before its retry, and starts it
// again: the remaining two attempts happen, no more, each recorded.
func TestKilledBetweenAttempts(t *testing.T) {
	t.Parallel()
	bin := telemetrytest.Build(t, "webhook")
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Status: 500})
	cfg := webhooktest.Config(t, kafkatest.New(t))
	cfg.SandboxPrivateEndpoints = []string{hooks.Addr()}
	vars := webhooktest.Env(cfg)

	first := telemetrytest.StartProcess(t, bin, vars)
	scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
	if _, err := webhooktest.Client(first.URL, internalauth.Operator).SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: hooks.URL}); err != nil {
		t.Fatal(err)
	}
	e := webhooktest.OrderEvent(scope.GetAccountId(), scope.GetEnvironment(), "order.completed")
	webhooktest.Publish(context.Background(), t, cfg, e)
	// Killed once the first attempt's failure is recorded: its retry is
	// a second away.
	deadline := time.Now().Add(30 * time.Second)
	for !firstAttemptFailed(first.URL, e.GetId()) {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt was not recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	first.Kill(t)
	if n := len(hooks.Deliveries()); n != 1 {
		t.Fatalf("%d deliveries before the restart, want 1", n)
	}

	second := telemetrytest.StartProcess(t, bin, vars)
	operator := webhooktest.Client(second.URL, internalauth.Operator)
	got := webhooktest.WaitForStatus(t, operator, e.GetId(), webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED, 30*time.Second)
	time.Sleep(3 * time.Second) // nothing more may happen: no condition to wait for
	a := attempts(t, second.URL, e.GetId())
	if len(got.GetAttempts()) != 3 || len(a) != 3 {
		t.Fatalf("%d attempts, want 3: %v", len(a), a)
	}
	for i, x := range a {
		if x.GetNumber() != int32(i+1) || x.GetError() != "status 500" || x.GetStatusCode() != 500 {
			t.Errorf("attempt %v, want number %d answered 500", x, i+1)
		}
	}
	if n := len(hooks.Deliveries()); n != 3 {
		t.Errorf("the receiver got %d deliveries, want 3", n)
	}
}

// TestKilledDuringAnAttempt kills the webhook process while the receiver
// holds its request, and starts it again: once the lease runs out, the
// attempt is recorded as interrupted and counts. Killed during the first
// attempt, the delivery goes on; during the third, it fails without a
// fourth.
func TestKilledDuringAnAttempt(t *testing.T) {
	t.Parallel()
	bin := telemetrytest.Build(t, "webhook")
	hang, fail := webhooktest.Answer{Hang: true}, webhooktest.Answer{Status: 500}
	for _, tc := range []struct {
		name    string
		answers []webhooktest.Answer
		killAt  int
		status  webhookv1.DeliveryStatus
		errors  []string
	}{
		{"during the first", []webhooktest.Answer{hang, fail, {}}, 1, webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED,
			[]string{"interrupted: the webhook service stopped during this attempt", "status 500", ""}},
		{"during the third", []webhooktest.Answer{fail, fail, hang, {}}, 3, webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED,
			[]string{"status 500", "status 500", "interrupted: the webhook service stopped during this attempt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hooks := webhooktest.NewReceiver(t, tc.answers...)
			cfg := webhooktest.Config(t, kafkatest.New(t))
			// A lease of 1 s + 5 s: the restart waits that long.
			cfg.AttemptTimeout = time.Second
			cfg.SandboxPrivateEndpoints = []string{hooks.Addr()}
			vars := webhooktest.Env(cfg)

			first := telemetrytest.StartProcess(t, bin, vars)
			scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
			if _, err := webhooktest.Client(first.URL, internalauth.Operator).SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: hooks.URL}); err != nil {
				t.Fatal(err)
			}
			e := webhooktest.OrderEvent(scope.GetAccountId(), scope.GetEnvironment(), "order.completed")
			webhooktest.Publish(context.Background(), t, cfg, e)
			if !hooks.WaitFor(30*time.Second, func(d []webhooktest.Delivery, hanging int) bool { return len(d) == tc.killAt && hanging == 1 }) {
				t.Fatalf("attempt %d never reached the receiver", tc.killAt)
			}
			first.Kill(t)
			second := telemetrytest.StartProcess(t, bin, vars)
			// Its lease has seconds to run: the attempt is still in flight
			// as far as anyone can tell.
			a := attempts(t, second.URL, e.GetId())
			if len(a) != tc.killAt || a[tc.killAt-1].GetError() != "in progress" {
				t.Fatalf("right after the restart: attempts %v; want %d, the last in progress", a, tc.killAt)
			}
			got := webhooktest.WaitForStatus(t, webhooktest.Client(second.URL, internalauth.Operator), e.GetId(), tc.status, 60*time.Second)
			time.Sleep(3 * time.Second) // nothing more may happen: no condition to wait for
			a = attempts(t, second.URL, e.GetId())
			if len(got.GetAttempts()) != 3 || len(a) != 3 {
				t.Fatalf("%d attempts, want 3: %v", len(a), a)
			}
			for i, x := range a {
				if x.GetNumber() != int32(i+1) || x.GetError() != tc.errors[i] {
					t.Errorf("attempt %d: %q, want %q", x.GetNumber(), x.GetError(), tc.errors[i])
				}
			}
			if n := len(hooks.Deliveries()); n != 3 {
				t.Errorf("the receiver got %d deliveries, want 3", n)
			}
		})
	}
}
