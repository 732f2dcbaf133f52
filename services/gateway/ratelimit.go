package gateway

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
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
	// failure, so a dead Redis does not cost every request a timeout.
	Cooldown time.Duration

	sharedDownUntil atomic.Int64
}

func (f *FailoverLimiter) Allow(ctx context.Context, key string, perMinute int) (RateDecision, error) {
	if time.Now().UnixNano() >= f.sharedDownUntil.Load() {
		d, err := f.Shared.Allow(ctx, key, perMinute)
		if err == nil {
			return d, nil
		}
		f.sharedDownUntil.Store(time.Now().Add(f.Cooldown).UnixNano())
		f.Log.WarnContext(ctx, "shared rate limiter unavailable, limiting per replica", "err", err, "cooldown", f.Cooldown.String())
	}
	return f.Local.Allow(ctx, key, perMinute)
}

// LocalLimiter is an in-memory token bucket per key, equivalent to the GCRA
// of the shared limiter: a burst of the per-minute limit, refilled evenly.
type LocalLimiter struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewLocalLimiter returns an empty limiter.
func NewLocalLimiter() *LocalLimiter {
	return &LocalLimiter{buckets: map[string]*rate.Limiter{}}
}

func (l *LocalLimiter) Allow(_ context.Context, key string, perMinute int) (RateDecision, error) {
	l.mu.Lock()
	b, ok := l.buckets[key]
	perSecond := rate.Limit(float64(perMinute) / 60)
	if !ok || b.Burst() != perMinute {
		b = rate.NewLimiter(perSecond, perMinute)
		l.buckets[key] = b
	}
	l.mu.Unlock()

	now := time.Now()
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
