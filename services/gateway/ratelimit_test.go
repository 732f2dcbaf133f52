package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/gateway"
)

// contextLimiter answers like a healthy Redis, except to a caller whose
// context has ended.
type contextLimiter struct{ calls atomic.Int32 }

func (l *contextLimiter) Allow(ctx context.Context, _ string, perMinute int) (gateway.RateDecision, error) {
	l.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return gateway.RateDecision{}, fmt.Errorf("redis rate limit: %w", err)
	}
	return gateway.RateDecision{Allowed: true, Limit: perMinute, Remaining: perMinute - 1}, nil
}

// A request whose client hung up is no sign of a Redis outage. Taken for
// one, every dropped request moved the whole replica to its own allowance
// for a cool-down, which a partner could repeat at will to multiply its
// limit by the replicas.
func TestFailoverLimiterTakesACallerGivingUpForNoOutage(t *testing.T) {
	shared := &contextLimiter{}
	f := &gateway.FailoverLimiter{Shared: shared, Local: &gateway.LocalLimiter{}, Log: quiet, Cooldown: time.Hour}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := f.Allow(gone, "k", 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %+v, %v; want context.Canceled", d, err)
	}
	if _, err := f.Allow(context.Background(), "k", 5); err != nil {
		t.Fatal(err)
	}
	if n := shared.calls.Load(); n != 2 {
		t.Fatalf("shared limiter asked %d times, want 2: the next request must still go to Redis", n)
	}
}

// recoveringLimiter fails until recovering is set; then every call hangs
// until release is closed, and succeeds.
type recoveringLimiter struct {
	calls      atomic.Int32
	recovering atomic.Bool
	release    chan struct{}
}

func (l *recoveringLimiter) Allow(ctx context.Context, _ string, perMinute int) (gateway.RateDecision, error) {
	l.calls.Add(1)
	if !l.recovering.Load() {
		return gateway.RateDecision{}, errors.New("redis: connection refused")
	}
	<-l.release
	return gateway.RateDecision{Allowed: true, Limit: perMinute}, nil
}

// When the cool-down ends one request probes Redis; the others keep
// limiting locally until it answers. Sending them all made every request
// arriving then wait for a Redis that may still be hung, once a cool-down.
func TestFailoverLimiterProbesRedisOnceWhenTheCooldownEnds(t *testing.T) {
	shared := &recoveringLimiter{release: make(chan struct{})}
	const cooldown = 20 * time.Millisecond
	f := &gateway.FailoverLimiter{Shared: shared, Local: &gateway.LocalLimiter{}, Log: quiet, Cooldown: cooldown}
	if d, err := f.Allow(context.Background(), "k", 100); err != nil || !d.Allowed {
		t.Fatalf("first request, Redis down: %+v, %v", d, err)
	}
	time.Sleep(2 * cooldown)
	shared.recovering.Store(true)

	onlyOneProbe(t, 50, func(int) error {
		d, err := f.Allow(context.Background(), "k", 100)
		if err == nil && !d.Allowed {
			err = fmt.Errorf("refused: %+v", d)
		}
		return err
	}, func() int64 { return int64(shared.calls.Load()) - 1 }, func() { close(shared.release) })
	// The probe succeeded: Redis is trusted again.
	if _, err := f.Allow(context.Background(), "k", 100); err != nil {
		t.Fatal(err)
	}
	if n := shared.calls.Load(); n != 3 {
		t.Fatalf("Redis asked %d times in all, want 3 (failure, probe, next request)", n)
	}
}

// A limit that changes mid-window keeps the share of the allowance already
// used, as the shared GCRA does; a fresh bucket handed out a second
// allowance.
func TestLocalLimiterKeepsTheShareUsedWhenTheLimitChanges(t *testing.T) {
	l := &gateway.LocalLimiter{}
	ctx := context.Background()
	for range 2 {
		if d, _ := l.Allow(ctx, "k", 4); !d.Allowed {
			t.Fatalf("under 4/min: %+v", d)
		}
	}
	// Half of 4 used; half of 8 is left.
	for i := range 4 {
		d, _ := l.Allow(ctx, "k", 8)
		if !d.Allowed || d.Remaining != 3-i || d.Limit != 8 {
			t.Fatalf("request %d under 8/min: %+v", i+1, d)
		}
	}
	if d, _ := l.Allow(ctx, "k", 8); d.Allowed {
		t.Fatalf("a limit raised mid-window granted more than its share: %+v", d)
	}
	// All used; lowering the limit leaves none.
	if d, _ := l.Allow(ctx, "k", 2); d.Allowed {
		t.Fatalf("a limit lowered mid-window granted a fresh allowance: %+v", d)
	}
}

// Buckets of keys that have gone quiet are dropped once full again, so the
// map holds recently active keys, not every key seen since the start.
func TestLocalLimiterForgetsKeysOnceTheirBucketsRefill(t *testing.T) {
	l := &gateway.LocalLimiter{}
	now := time.Unix(1_700_000_000, 0)
	gateway.SetLocalLimiterClock(l, func() time.Time { return now })
	ctx := context.Background()
	for i := range 1000 {
		if d, _ := l.Allow(ctx, fmt.Sprint("key-", i), 60); !d.Allowed {
			t.Fatalf("key %d: %+v", i, d)
		}
	}
	// A key drained later is still refilling when the others are full
	// again, and must keep its state: a dropped bucket would come back full.
	now = now.Add(30 * time.Second)
	for range 120 {
		l.Allow(ctx, "busy", 120)
	}
	now = now.Add(31 * time.Second)
	d, _ := l.Allow(ctx, "busy", 120)
	if !d.Allowed || d.Remaining != 61 {
		t.Fatalf("busy key 31 s after draining it: %+v, want allowed with 61 remaining", d)
	}
	if n := gateway.LocalLimiterKeys(l); n != 1 {
		t.Fatalf("%d buckets kept, want 1 (only the busy key is not full)", n)
	}
}

// Concurrent requests of one key each report what their own request left,
// 99 down to 0, as the shared limiter does.
func TestLocalLimiterReportsEachRequestsOwnRemaining(t *testing.T) {
	l := &gateway.LocalLimiter{}
	const limit, requests = 100, 400
	var mu sync.Mutex
	remaining := map[int]int{}
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			d, _ := l.Allow(context.Background(), "k", limit)
			if d.Allowed {
				mu.Lock()
				remaining[d.Remaining]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for r := range limit {
		if remaining[r] != 1 {
			t.Errorf("%d allowed requests report %d remaining, want 1", remaining[r], r)
		}
	}
}

// While Redis is down the per-replica limiter reports when the allowance
// is whole again, as the shared one does: one request of a 3/min key takes
// 20 s to come back, and an empty allowance a full minute. A shorter
// figure would send a refused client back too early, into more 429s.
func TestLocalLimiterReportsTheResetInSeconds(t *testing.T) {
	l := &gateway.LocalLimiter{}
	now := time.Unix(1_700_000_000, 0)
	gateway.SetLocalLimiterClock(l, func() time.Time { return now })
	ctx := context.Background()
	want := []time.Duration{20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i, reset := range want {
		d, _ := l.Allow(ctx, "k", 3)
		if d.Allowed != (i < 3) || d.ResetAfter != reset {
			t.Errorf("request %d of a 3/min key: allowed %v, reset after %s; want allowed %v, %s", i+1, d.Allowed, d.ResetAfter, i < 3, reset)
		}
	}
}

// An unset cool-down is one second, as CachedAccounts's is: zero would
// send every request to a dead Redis.
func TestFailoverLimiterWithoutACooldownKeepsOffRedisForOneSecond(t *testing.T) {
	shared := &recoveringLimiter{release: make(chan struct{})}
	f := &gateway.FailoverLimiter{Shared: shared, Local: &gateway.LocalLimiter{}, Log: quiet}
	for range 5 {
		if d, err := f.Allow(context.Background(), "k", 100); err != nil || !d.Allowed {
			t.Fatalf("Redis down: %+v, %v", d, err)
		}
	}
	if n := shared.calls.Load(); n != 1 {
		t.Fatalf("Redis asked %d times within the cool-down, want 1", n)
	}
}
