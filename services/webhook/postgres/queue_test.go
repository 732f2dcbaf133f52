package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

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

// A job inserted with its event starts within milliseconds, announced
// over LISTEN/NOTIFY rather than found by a poll: the order-to-webhook
// latency leans on it. The poll is an hour here, so a job that waited for
// it would fail the test.
func TestANewJobStartsWithinMilliseconds(t *testing.T) {
	st, pool := newStore(t)
	d := &deliverer{ran: map[string]time.Time{}, ping: make(chan struct{}, 1)}
	q, err := postgres.NewQueue(pool, d, postgres.QueueConfig{Workers: 16, AttemptTimeout: time.Second, PollInterval: time.Hour})
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
	// The notifier listens once started; the first job may come first.
	add(t, st, newEvent(s))
	<-d.ping

	const n = 200
	var took, afterCommit []time.Duration
	for range n {
		e := newEvent(s)
		added := time.Now()
		add(t, st, e)
		committed := time.Now()
		select {
		case <-d.ping:
		case <-time.After(10 * time.Second):
			t.Fatal("a job did not start within 10 s")
		}
		d.mu.Lock()
		took = append(took, d.ran[e.ID].Sub(added))
		afterCommit = append(afterCommit, d.ran[e.ID].Sub(committed))
		d.mu.Unlock()
	}
	slices.Sort(took)
	slices.Sort(afterCommit)
	p50, p99 := took[n/2], took[n*99/100]
	t.Logf("from AddEvent's call to the job's start, over %d jobs: p50 %s, p99 %s, max %s", n, p50, p99, took[n-1])
	t.Logf("from its commit to the job's start: p50 %s, p99 %s", afterCommit[n/2], afterCommit[n*99/100])
	if p99 > 500*time.Millisecond {
		t.Errorf("p99 %s; want a job started within milliseconds of its insert, not by a poll", p99)
	}
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
