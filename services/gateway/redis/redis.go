// Package redis keeps the gateway's shared, short-lived state in Redis: the
// per-key rate-limit counters (GCRA, github.com/go-redis/redis_rate) and the
// authentication cache.
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/libs/coalesce"
	"github.com/esimplatform/esim/services/gateway"
)

// Connect opens a client with short timeouts: Redis sits on the request
// path, and a slow or dead Redis must degrade the gateway, not stall it.
// go-redis's defaults would make every command against a dead Redis wait
// about half a second (five dial attempts 100 ms apart, then a retry after
// a 10 to 20 ms backoff), and the requests behind it with it. Here a
// command dials once and retries once at once: enough to replace a pooled
// connection that Redis closed, and a refused connection fails in
// microseconds, so the caller falls back straight away.
func Connect(redisURL string) (*goredis.Client, error) {
	goredis.SetLogger(slogLogger{})
	opts, err := goredis.ParseURL(redisURL)
	if err != nil {
		// net/url's errors quote the whole URL, password included.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("parse REDIS_URL: %w", err)
	}
	opts.DialTimeout = 250 * time.Millisecond
	opts.ReadTimeout = 250 * time.Millisecond
	opts.WriteTimeout = 250 * time.Millisecond
	opts.DialerRetries = 1
	opts.MaxRetries = 1
	opts.MinRetryBackoff = -1
	opts.MaxRetryBackoff = -1
	return goredis.NewClient(opts), nil
}

// slogLogger takes go-redis's own log lines (a pool that cannot dial, say)
// into the service's JSON log; its default logger writes plain text to
// stderr.
type slogLogger struct{}

func (slogLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// RateLimiter counts requests per key in Redis with GCRA, so every gateway
// replica shares one allowance per key.
//
// Checks are coalesced (libs/coalesce), as plan lookups are: a check made
// while Redis is idle goes out alone; checks made while earlier ones are in
// flight go out together, and a key's checks in one batch take its
// allowance in one AllowAtMost call, one round trip and one script run
// however many requests share it. Under load most requests then share a
// Redis call; the allowance stays shared and is never exceeded (allowBatch).
type RateLimiter struct {
	limiter *redis_rate.Limiter
	checks  *coalesce.Batcher[rateCheck, rateOutcome]
}

// rateChecksInFlight is how many Redis calls for rate limits one gateway
// keeps outstanding; checks beyond them queue and share the next call.
const rateChecksInFlight = 4

// maxRateChecksPerCall bounds one batch.
const maxRateChecksPerCall = 128

type rateCheck struct {
	key       string
	perMinute int
}

// rateOutcome carries a per-check error: one key's failed call must not
// fail the other keys' checks in the batch.
type rateOutcome struct {
	decision gateway.RateDecision
	err      error
}

// NewRateLimiter returns a limiter on client.
func NewRateLimiter(client *goredis.Client) *RateLimiter {
	l := &RateLimiter{limiter: redis_rate.NewLimiter(client)}
	l.checks = coalesce.New(l.allowBatch, coalesce.Options{MaxBatch: maxRateChecksPerCall, MaxInFlight: rateChecksInFlight})
	return l
}

func (l *RateLimiter) Allow(ctx context.Context, key string, perMinute int) (gateway.RateDecision, error) {
	out, err := l.checks.Do(ctx, rateCheck{key: key, perMinute: perMinute})
	if err != nil {
		return gateway.RateDecision{}, err
	}
	return out.decision, out.err
}

// allowBatch answers the checks in order. The checks of one key (and
// limit) take up to n requests' worth of its allowance in one call, and
// the first ones answered get it, as n calls made at the same instant
// would. Each allowed check reports what remains after it. One difference
// from n separate calls, in the partner's disfavour only: when a batch asks
// for more than is left, the fraction of a request left over is spent too,
// so the limit is never exceeded and a key refused at its limit waits at
// most one emission interval (60s / limit) longer.
func (l *RateLimiter) allowBatch(ctx context.Context, checks []rateCheck) ([]rateOutcome, error) {
	groups := map[rateCheck][]int{}
	for i, c := range checks {
		groups[c] = append(groups[c], i)
	}
	out := make([]rateOutcome, len(checks))
	answer := func(c rateCheck, idx []int) {
		res, err := l.limiter.AllowAtMost(ctx, "gw:rl:"+c.key, redis_rate.PerMinute(c.perMinute), len(idx))
		for n, i := range idx {
			if err != nil {
				out[i].err = fmt.Errorf("redis rate limit: %w", err)
				continue
			}
			d := gateway.RateDecision{Limit: c.perMinute, ResetAfter: res.ResetAfter}
			if n < res.Allowed {
				d.Allowed = true
				d.Remaining = res.Remaining + res.Allowed - 1 - n
			}
			out[i].decision = d
		}
	}
	if len(groups) == 1 {
		// The usual case, and the only one at low load: no goroutine to
		// start and wake the caller from.
		for c, idx := range groups {
			answer(c, idx)
		}
		return out, nil
	}
	// Distinct keys go out in parallel, as unbatched checks would.
	var wg sync.WaitGroup
	for c, idx := range groups {
		wg.Go(func() { answer(c, idx) })
	}
	wg.Wait()
	return out, nil
}

// AuthCache stores authentication outcomes under the SHA-256 of the key.
type AuthCache struct {
	client *goredis.Client
}

// NewAuthCache returns a cache on client.
func NewAuthCache(client *goredis.Client) *AuthCache {
	return &AuthCache{client: client}
}

// rejected marks a cached authentication failure.
const rejected = "-"

func (c *AuthCache) Get(ctx context.Context, keyHash string) (gateway.Principal, bool, error) {
	v, err := c.client.Get(ctx, "gw:auth:"+keyHash).Result()
	if errors.Is(err, goredis.Nil) {
		return gateway.Principal{}, false, nil
	}
	if err != nil {
		return gateway.Principal{}, false, fmt.Errorf("redis auth cache: %w", err)
	}
	if v == rejected {
		return gateway.Principal{}, false, gateway.ErrUnauthorized
	}
	var p gateway.Principal
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		// A value written by another version: treat as a miss.
		return gateway.Principal{}, false, nil
	}
	return p, true, nil
}

func (c *AuthCache) Put(ctx context.Context, keyHash string, p *gateway.Principal, ttl time.Duration) error {
	v := rejected
	if p != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		v = string(b)
	}
	if err := c.client.Set(ctx, "gw:auth:"+keyHash, v, ttl).Err(); err != nil {
		return fmt.Errorf("redis auth cache: %w", err)
	}
	return nil
}
