package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
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

// process is the webhook binary running as a process of its own.
type process struct {
	cmd *exec.Cmd
	url string
	// done is closed once the process ended, waitErr saying how.
	done    chan struct{}
	waitErr error
	logs    *telemetrytest.LogBuffer
}

// buildWebhook builds this command into a temporary directory.
func buildWebhook(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "webhook")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProcess runs bin with exactly vars as its environment, on a free
// loopback port, and returns once it listens. It is stopped, gracefully,
// when the test ends, unless something killed it before.
func startProcess(t *testing.T, bin string, vars map[string]string) *process {
	t.Helper()
	logs := &telemetrytest.LogBuffer{}
	out, listeners := telemetrytest.Listening()
	cmd := exec.Command(bin)
	cmd.Env = []string{"HTTP_ADDR=127.0.0.1:0"}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout = io.MultiWriter(out, logs)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), logs: logs}
	exited := make(chan error, 1)
	go func() {
		p.waitErr = cmd.Wait()
		out.Close()
		exited <- p.waitErr
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("webhook did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("webhook's log:\n%s", logs)
		}
	})
	addr, _ := listeners.Wait(t, exited, false)
	p.url = "http://" + addr
	return p
}

// kill ends the process with SIGKILL: no shutdown, no result recorded,
// no lease given back.
func (p *process) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		if ee, ok := p.waitErr.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the process ended with %v, not SIGKILL", p.waitErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the process is still running")
	}
}

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
	bin := buildWebhook(t)
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Status: 500})
	cfg := webhooktest.Config(t, kafkatest.New(t))
	vars := webhooktest.Env(cfg)

	first := startProcess(t, bin, vars)
	scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
	if _, err := webhooktest.Client(first.url, internalauth.Operator).SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: hooks.URL}); err != nil {
		t.Fatal(err)
	}
	e := webhooktest.OrderEvent(scope.GetAccountId(), scope.GetEnvironment(), "order.completed")
	webhooktest.Publish(context.Background(), t, cfg, e)
	// Killed once the first attempt's failure is recorded: its retry is
	// a second away.
	deadline := time.Now().Add(30 * time.Second)
	for !firstAttemptFailed(first.url, e.GetId()) {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt was not recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	first.kill(t)
	if n := len(hooks.Deliveries()); n != 1 {
		t.Fatalf("%d deliveries before the restart, want 1", n)
	}

	second := startProcess(t, bin, vars)
	operator := webhooktest.Client(second.url, internalauth.Operator)
	got := webhooktest.WaitForStatus(t, operator, e.GetId(), webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED, 30*time.Second)
	time.Sleep(3 * time.Second) // nothing more may happen: no condition to wait for
	a := attempts(t, second.url, e.GetId())
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
	bin := buildWebhook(t)
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
			vars := webhooktest.Env(cfg)

			first := startProcess(t, bin, vars)
			scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX}
			if _, err := webhooktest.Client(first.url, internalauth.Operator).SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: hooks.URL}); err != nil {
				t.Fatal(err)
			}
			e := webhooktest.OrderEvent(scope.GetAccountId(), scope.GetEnvironment(), "order.completed")
			webhooktest.Publish(context.Background(), t, cfg, e)
			if !hooks.WaitFor(30*time.Second, func(d []webhooktest.Delivery, hanging int) bool { return len(d) == tc.killAt && hanging == 1 }) {
				t.Fatalf("attempt %d never reached the receiver", tc.killAt)
			}
			first.kill(t)
			second := startProcess(t, bin, vars)
			// Its lease has seconds to run: the attempt is still in flight
			// as far as anyone can tell.
			a := attempts(t, second.url, e.GetId())
			if len(a) != tc.killAt || a[tc.killAt-1].GetError() != "in progress" {
				t.Fatalf("right after the restart: attempts %v; want %d, the last in progress", a, tc.killAt)
			}
			got := webhooktest.WaitForStatus(t, webhooktest.Client(second.url, internalauth.Operator), e.GetId(), tc.status, 60*time.Second)
			time.Sleep(3 * time.Second) // nothing more may happen: no condition to wait for
			a = attempts(t, second.url, e.GetId())
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
