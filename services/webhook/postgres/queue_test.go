package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/postgres"
)

// deliverer notes when each event's job first ran.
type deliverer struct {
	mu   sync.Mutex
	ran  map[string]time.Time
	ping chan struct{}
}

func (d *deliverer) Deliver(_ context.Context, eventID string) (webhook.Outcome, error) {
	d.mu.Lock()
	if _, ok := d.ran[eventID]; !ok {
		d.ran[eventID] = time.Now()
	}
	d.mu.Unlock()
	d.ping <- struct{}{}
	return webhook.Outcome{Attempt: 1, Next: webhook.StatusDelivered}, nil
}

// Every job inserted with its event starts, announced over LISTEN/NOTIFY
// or found by the next poll (POLL_INTERVAL's default here): River drops
// an insert's notice that follows another within its cooldown, so the
// poll is what bounds a job's wait, and a job never waits for more. How
// soon jobs start is the bench's to say (make bench, the webhooks row);
// this logs what it saw.
func TestEveryNewJobStarts(t *testing.T) {
	st, pool := newStore(t)
	d := &deliverer{ran: map[string]time.Time{}, ping: make(chan struct{}, 1)}
	q, err := postgres.NewQueue(pool, d, postgres.QueueConfig{Workers: 16, AttemptTimeout: time.Second, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := q.Stop(stop); err != nil {
			t.Error(err)
		}
	})
	s := scope()
	setEndpoint(t, st, s, "https://example.com/")
	const n = 50
	var took []time.Duration
	for range n {
		e := newEvent(s)
		added := time.Now()
		add(t, st, e)
		select {
		case <-d.ping:
		case <-time.After(30 * time.Second):
			t.Fatal("a job did not start")
		}
		d.mu.Lock()
		took = append(took, d.ran[e.ID].Sub(added))
		d.mu.Unlock()
	}
	slices.Sort(took)
	t.Logf("from AddEvent's call to the job's start, over %d jobs: p50 %s, max %s", n, took[n/2], took[n-1])
}

// A job waiting for its endpoint's cap looks again soon, then less and
// less often.
func TestBusyWaitBacksOff(t *testing.T) {
	for _, tc := range []struct {
		metadata string
		want     time.Duration
	}{
		{`{}`, 10 * time.Millisecond},
		{`{"snoozes":1}`, 20 * time.Millisecond},
		{`{"snoozes":3}`, 80 * time.Millisecond},
		{`{"snoozes":7}`, time.Second},
		{`{"snoozes":1000}`, time.Second},
	} {
		if got := postgres.BusyWait([]byte(tc.metadata)); got != tc.want {
			t.Errorf("busyWait(%s) = %s, want %s", tc.metadata, got, tc.want)
		}
	}
}

// webhook.deliveries.due counts the deliveries due that no worker has
// taken, per environment, 0 included.
func TestDueDeliveriesAreMeasured(t *testing.T) {
	st, pool := newStore(t)
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, "webhook", telemetry.Config{LogLevel: "warn"}, &telemetrytest.LogBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	// Never started: what is added stays due.
	q, err := postgres.NewQueue(pool, &deliverer{}, postgres.QueueConfig{Workers: 1, AttemptTimeout: time.Second, Meter: tel.MeterProvider})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := q.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	s := scope()
	setEndpoint(t, st, s, "https://example.com/")
	for range 3 {
		add(t, st, newEvent(s))
	}
	metrics := telemetrytest.Scrape(tel.MetricsHandler)
	for env, want := range map[webhook.Environment]string{s.Environment: "3", otherEnvironment(s.Environment): "0"} {
		if got := telemetrytest.Sample(metrics, "webhook_deliveries_due", map[string]string{"environment": string(env)}); got != want {
			t.Errorf("webhook_deliveries_due{environment=%s} = %q, want %s", env, got, want)
		}
	}
}

func otherEnvironment(env webhook.Environment) webhook.Environment {
	if env == webhook.Live {
		return webhook.Sandbox
	}
	return webhook.Live
}
