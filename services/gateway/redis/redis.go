// Package redis keeps the gateway's shared, short-lived state in Redis: the
// per-key rate-limit counters (GCRA, github.com/go-redis/redis_rate) and the
// authentication cache.
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

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
	opts, err := goredis.ParseURL(redisURL)
	if err != nil {
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

// RateLimiter counts requests per key in Redis with GCRA, so every gateway
// replica shares one allowance per key.
type RateLimiter struct {
	limiter *redis_rate.Limiter
}

// NewRateLimiter returns a limiter on client.
func NewRateLimiter(client *goredis.Client) *RateLimiter {
	return &RateLimiter{limiter: redis_rate.NewLimiter(client)}
}

func (l *RateLimiter) Allow(ctx context.Context, key string, perMinute int) (gateway.RateDecision, error) {
	res, err := l.limiter.Allow(ctx, "gw:rl:"+key, redis_rate.PerMinute(perMinute))
	if err != nil {
		return gateway.RateDecision{}, fmt.Errorf("redis rate limit: %w", err)
	}
	return gateway.RateDecision{
		Allowed:    res.Allowed > 0,
		Limit:      perMinute,
		Remaining:  res.Remaining,
		ResetAfter: res.ResetAfter,
	}, nil
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
