package gateway

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// FailoverLimiter uses the shared limiter (Redis) and, while it fails, a
// per-replica in-memory one. The decision, documented for operators: when
// Redis is down the gateway stays up and keeps limiting, each replica on its
// own, so a partner may briefly get up to (replicas x limit) per minute.
// Refusing all traffic because a counter store is down would turn a cache
// outage into a platform outage.
type FailoverLimiter struct {
	Shared RateLimiter
	Local  *LocalLimiter
	Log    *slog.Logger
	// Cooldown is how long to stay on the local limiter after a shared
	// failure, so a dead Redis does not cost every request a timeout. When
	// it ends, one request probes Redis and the rest stay local until that
	// probe succeeds. Zero means one second, as for CachedAccounts.
	Cooldown time.Duration

	shared breaker
}

func (f *FailoverLimiter) cooldown() time.Duration { return cooldownOr(f.Cooldown) }

// Allow implements RateLimiter: on the shared limiter while it answers,
// on the local one during a cool-down.
func (f *FailoverLimiter) Allow(ctx context.Context, key string, perMinute int) (RateDecision, error) {
	if f.shared.allow(time.Now(), f.cooldown()) {
		d, err := f.Shared.Allow(ctx, key, perMinute)
		if err == nil {
			if f.shared.succeeded() {
				f.Log.InfoContext(ctx, "shared rate limiter answers again")
			}
			return d, nil
		}
		if ctx.Err() != nil {
			// The caller went away (or ran out of time): that says nothing
			// about Redis, and must not move every request of this replica
			// to its own allowance for a cool-down. A client that drops its
			// requests could otherwise keep its limit multiplied by the
			// replicas at will.
			return RateDecision{}, ctx.Err()
		}
		if f.shared.failed(time.Now(), f.cooldown()) {
			f.Log.WarnContext(ctx, "shared rate limiter unavailable, limiting per replica", "err", err, "cooldown", f.cooldown().String())
		}
	}
	return f.Local.Allow(ctx, key, perMinute)
}

// LocalLimiter is an in-memory token bucket per key, equivalent to the GCRA
// of the shared limiter: a burst of the per-minute limit, refilled evenly.
// Its zero value is ready to use.
type LocalLimiter struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	// swept is when idle buckets were last dropped.
	swept time.Time
	// now replaces the clock in tests.
	now func() time.Time
}

// localSweepEvery is how often idle buckets are dropped: one pass over the
// map a minute costs little, and keeps the map to the keys seen within
// about two minutes rather than every key seen since the process started.
const localSweepEvery = time.Minute

// Allow implements RateLimiter for this process alone.
func (l *LocalLimiter) Allow(_ context.Context, key string, perMinute int) (RateDecision, error) {
	perSecond := rate.Limit(float64(perMinute) / 60)

	// One lock for the whole decision, so that concurrent requests of a key
	// each report the allowance their own request left, as Redis does.
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.now != nil {
		now = l.now()
	}
	if l.buckets == nil {
		l.buckets = map[string]*rate.Limiter{}
	}
	l.sweep(now)
	b, ok := l.buckets[key]
	switch {
	case !ok:
		b = rate.NewLimiter(perSecond, perMinute)
		l.buckets[key] = b
	case b.Burst() != perMinute:
		b = resized(b, now, perMinute)
		l.buckets[key] = b
	}

	allowed := b.AllowN(now, 1)
	tokens := b.TokensAt(now)
	missing := float64(perMinute) - tokens
	return RateDecision{
		Allowed:    allowed,
		Limit:      perMinute,
		Remaining:  max(0, int(math.Floor(tokens))),
		ResetAfter: time.Duration(missing / float64(perSecond) * float64(time.Second)),
	}, nil
}

// resized is b under a new limit with the same share of its allowance
// used, as the shared GCRA keeps it: a fresh, full bucket would hand a key
// whose limit changes mid-window a second allowance. Rounding counts a
// fraction of a request as used.
func resized(b *rate.Limiter, now time.Time, perMinute int) *rate.Limiter {
	left := min(max(b.TokensAt(now)/float64(b.Burst()), 0), 1)
	nb := rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)
	if used := perMinute - int(math.Floor(left*float64(perMinute))); used > 0 {
		nb.AllowN(now, used)
	}
	return nb
}

// sweep drops the buckets that have refilled: a full bucket is what a
// missing one would be made as, so only memory changes. Entries for every
// key ever seen during an outage would otherwise stay for the life of the
// process.
func (l *LocalLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < localSweepEvery {
		return
	}
	l.swept = now
	for key, b := range l.buckets {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(l.buckets, key)
		}
	}
}
