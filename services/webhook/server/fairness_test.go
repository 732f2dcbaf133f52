package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/server"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// defaults is the configuration a deployment gets when it sets only what
// is required.
func defaults(t *testing.T) server.Config {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL":  "postgres://u@h:5432/webhook",
		"CALLERS":       internalauthtest.CallersEnv(),
		"KAFKA_BROKERS": "kafka:9092",
		"SECRETS_KEY":   webhooktest.NewSecretsKey(),
	}
	var cfg server.Config
	if err := config.Parse(context.Background(), func(k string) string { return env[k] }, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (s *service) ping(t *testing.T, scope *webhookv1.Scope) *webhookv1.Event {
	t.Helper()
	e, err := s.operator.SendTestEvent(context.Background(), &webhookv1.SendTestEventRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// holding waits until every receiver holds want requests, unanswered.
func holding(t *testing.T, receivers []*webhooktest.Receiver, want int) {
	t.Helper()
	for i, r := range receivers {
		if !r.WaitFor(30*time.Second, func(_ []webhooktest.Delivery, hanging int) bool { return hanging == want }) {
			t.Fatalf("slow receiver %d holds %d requests, want %d", i, r.Hanging(), want)
		}
	}
}

// stillHolding fails unless every receiver got exactly its first want
// requests and holds them all: none has timed out or been retried, so
// whatever was delivered meanwhile did not wait for a worker they held.
func stillHolding(t *testing.T, receivers []*webhooktest.Receiver, want int, what string) {
	t.Helper()
	for i, r := range receivers {
		if got, hanging := len(r.Deliveries()), r.Hanging(); got != want || hanging != want {
			t.Errorf("when %s, slow receiver %d (of %d) had got %d requests and held %d; want its first %d, all still held", what, i, len(receivers), got, hanging, want)
			return
		}
	}
}

// The case, with the production defaults: four partners whose
// endpoints hang, five test events each, hold as many workers as they
// may; a fifth partner's first attempt is made and recorded while every
// one of their requests still hangs, not once the 10 s timeouts free a
// worker.
func TestSlowPartnersDoNotDelayAnotherPartnersFirstAttempt(t *testing.T) {
	t.Parallel()
	d := defaults(t)
	s := start(t, func(c *server.Config) { c.Workers, c.PerEndpointConcurrency = d.Workers, d.PerEndpointConcurrency })
	var slow []*webhooktest.Receiver
	for range 4 {
		r := webhooktest.NewReceiver(t, webhooktest.Answer{Hang: true})
		scope, _ := s.endpoint(t, sandbox, r.URL)
		for range 5 {
			s.ping(t, scope)
		}
		slow = append(slow, r)
	}
	held := min(5, d.PerEndpointConcurrency)
	holding(t, slow, held)

	fresh := webhooktest.NewReceiver(t)
	scope, _ := s.endpoint(t, sandbox, fresh.URL)
	ping := s.ping(t, scope)
	fresh.Wait(t, 1, 30*time.Second)
	stillHolding(t, slow, held, "the fifth partner's ping arrived")
	got := s.wait(t, ping.GetId(), delivered, 30*time.Second)
	if a := got.GetAttempts(); len(a) != 1 || a[0].GetStatusCode() != 200 {
		t.Errorf("the fifth partner's ping: attempts %v, want one answered 200", a)
	}
	stillHolding(t, slow, held, "its attempt was recorded")
}

// Sandbox traffic cannot take live's workers: with every sandbox worker
// held by hanging sandbox endpoints, a live partner's first attempt is
// made while they all still hang.
func TestASandboxFloodDoesNotDelayLive(t *testing.T) {
	t.Parallel()
	liveHooks := webhooktest.NewTLSReceiver(t)
	const workers = 16
	s := start(t, func(c *server.Config) {
		c.Workers, c.PerEndpointConcurrency = workers, 1
		c.EndpointCAFile = liveHooks.CAFile(t)
	})
	var slow []*webhooktest.Receiver
	for range workers {
		r := webhooktest.NewReceiver(t, webhooktest.Answer{Hang: true})
		scope, _ := s.endpoint(t, sandbox, r.URL)
		for range 3 {
			s.ping(t, scope)
		}
		slow = append(slow, r)
	}
	holding(t, slow, 1)

	scope, _ := s.endpoint(t, live, liveHooks.URL)
	ping := s.ping(t, scope)
	liveHooks.Wait(t, 1, 30*time.Second)
	stillHolding(t, slow, 1, "the live ping arrived")
	s.wait(t, ping.GetId(), delivered, 30*time.Second)
	stillHolding(t, slow, 1, "the live ping's attempt was recorded")
}

// A partner's backlog does not sit ahead of another partner's event: with
// one partner's hanging endpoint holding its one slot and far more of its
// events waiting than the pool has workers, a second partner's ping is
// made and recorded at once, while the first partner's request still
// hangs.
func TestAFloodOfOnePartnerDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	const workers = 16
	s := start(t, func(c *server.Config) { c.Workers, c.PerEndpointConcurrency = workers, 1 })
	flooded := webhooktest.NewReceiver(t, webhooktest.Answer{Hang: true})
	scope, _ := s.endpoint(t, sandbox, flooded.URL)
	began := time.Now()
	for range 8 * workers {
		s.ping(t, scope)
	}
	holding(t, []*webhooktest.Receiver{flooded}, 1)
	t.Logf("the flood of %d events took %s", 8*workers, time.Since(began))

	fresh := webhooktest.NewReceiver(t)
	other, _ := s.endpoint(t, sandbox, fresh.URL)
	sent := len(flooded.Deliveries())
	began = time.Now()
	ping := s.ping(t, other)
	s.wait(t, ping.GetId(), delivered, 30*time.Second)
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("the other partner's ping took %s behind the flood; want it at once", took)
	}
	if got, hanging := len(flooded.Deliveries()), flooded.Hanging(); got != sent || hanging != 1 {
		t.Errorf("while the other partner's ping went out, the flooded endpoint got %d more requests and held %d; want none more, its one held", got-sent, hanging)
	}
}
