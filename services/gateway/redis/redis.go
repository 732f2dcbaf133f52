// Package redis keeps the gateway's shared, short-lived state in Redis: the
// per-key rate-limit counters (GCRA, github.com/go-redis/redis_rate) and the
// authentication cache.
package redis

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/esimplatform/esim/libs/redisurl"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/libs/coalesce"
	"github.com/esimplatform/esim/services/gateway"
)

// Connect opens a client with short timeouts: Redis sits on the request
// path, and a slow or dead Redis must degrade the gateway, not stall it.
// go-redis's defaults (five dial attempts 100 ms apart, then a retry after
// a backoff) would make every command against a dead Redis, and the
// requests behind it, wait. Here a command dials once and retries once at
// once: enough to replace a pooled connection that Redis closed, while a
// refused connection fails at once and the caller falls back.
func Connect(redisURL string) (*goredis.Client, error) {
	goredis.SetLogger(slogLogger{})
	opts, err := redisurl.Parse(redisURL)
	if err != nil {
		return nil, fmt.Errorf("parse REDIS_URL: %w", err)
	}
	opts.DialTimeout = commandTimeout
	opts.ReadTimeout = commandTimeout
	opts.WriteTimeout = commandTimeout
	// A hung Redis holds every pooled connection for a read timeout; a
	// caller waits for a free one no longer than for any other step.
	opts.PoolTimeout = commandTimeout
	// Callers bound a whole call with one deadline (see RateLimiter.Allow
	// and AuthCache); with this go-redis stops a read at that deadline
	// rather than run its own timeout past it.
	opts.ContextTimeoutEnabled = true
	opts.DialerRetries = 1
	opts.MaxRetries = 1
	opts.MinRetryBackoff = -1
	opts.MaxRetryBackoff = -1
	return goredis.NewClient(opts), nil
}

// commandTimeout bounds each step of a Redis command: dialling, waiting for
// a pooled connection, writing, reading.
const commandTimeout = 250 * time.Millisecond

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
// One: each call wakes Redis and then the gateway, which at moderate load
// costs more than the short wait for the call ahead.
const rateChecksInFlight = 1

// maxRateChecksPerCall bounds one batch, and so one script run, which
// Redis runs to the end before anything else: 128 leaves ordinary batches
// whole and keeps a burst from making one call of thousands.
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

// NewRateLimiter returns a limiter on client. observe, when not nil,
// hears of every call to Redis the checks share.
func NewRateLimiter(client *goredis.Client, observe coalesce.Observer) *RateLimiter {
	l := &RateLimiter{limiter: redis_rate.NewLimiter(client)}
	l.checks = coalesce.New(l.allowBatch, coalesce.Options{MaxBatch: maxRateChecksPerCall, MaxInFlight: rateChecksInFlight, Observe: observe})
	return l
}

// Allow implements gateway.RateLimiter.
func (l *RateLimiter) Allow(ctx context.Context, key string, perMinute int) (gateway.RateDecision, error) {
	// A queued check waits for the calls ahead of it, each of which can
	// take a read timeout against a hung Redis; bounded from when it is
	// made, it fails within one timeout and the caller limits locally. A
	// batch it queued in is not sent for it once it has given up.
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := l.checks.Do(ctx, rateCheck{key: key, perMinute: perMinute})
	if err != nil {
		return gateway.RateDecision{}, err
	}
	return out.decision, out.err
}

// allowBatch answers the checks in order. The checks of one key (and
// limit) take up to n requests' worth of its allowance in one call, and
// the first ones answered get it, as n calls made at the same instant
// would. Each allowed check reports what remains after it, and when the
// allowance is back in full after it: the call's reset is the last
// allowed check's, and each one before it took one emission interval
// less. One difference
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
				after := res.Allowed - 1 - n // allowed checks answered after this one
				d.Allowed = true
				d.Remaining = res.Remaining + after
				d.ResetAfter = max(0, res.ResetAfter-time.Duration(after)*time.Minute/time.Duration(c.perMinute))
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

// AuthCache stores authentication outcomes under the SHA-256 of the key,
// each entry sealed with an HMAC over where it is stored and what it says.
// Redis is shared state that more than the gateway may reach (an operator,
// a backup, a compromised neighbour): unsealed, whoever could write to it
// could make up a key and an entry naming any account, and order on that
// account's balance. Sealed, a made-up entry, one moved from another key's
// slot, or one written with another secret is a miss: the key is checked
// with accounts, whose answer replaces it.
//
// Each call gives up after one command timeout in all: go-redis retries a
// call that timed out waiting for a pooled connection, which against a
// hung Redis doubled the wait.
type AuthCache struct {
	client *goredis.Client
	secret []byte
	log    *slog.Logger
}

// NewAuthCache returns a cache on client whose entries are sealed with
// secret; every replica sharing the Redis needs the same secret.
func NewAuthCache(client *goredis.Client, secret []byte, log *slog.Logger) *AuthCache {
	return &AuthCache{client: client, secret: secret, log: log}
}

// rejected marks a cached authentication failure.
const rejected = "-"

// sealVersion starts every sealed entry, so a later format can tell its
// entries from these.
const sealVersion = "v1."

// seal returns payload as stored at slot until the instant until: version,
// MAC, deadline (Unix ms), payload. The deadline is sealed too: Redis's
// TTL is not, and whoever can write to Redis could keep a genuine entry
// alive (PERSIST, or SET again) and with it a key revoked since.
func (c *AuthCache) seal(slot string, until time.Time, payload string) string {
	deadline := strconv.FormatInt(until.UnixMilli(), 10)
	return sealVersion + base64.RawURLEncoding.EncodeToString(c.mac(slot, deadline, payload)) + "." + deadline + "." + payload
}

// unseal returns the payload of v and its deadline, if v was sealed with
// this secret for this slot.
func (c *AuthCache) unseal(slot, v string) (payload string, until time.Time, ok bool) {
	rest, ok := strings.CutPrefix(v, sealVersion)
	if !ok {
		return "", time.Time{}, false
	}
	sum, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return "", time.Time{}, false
	}
	deadline, payload, ok := strings.Cut(rest, ".")
	if !ok {
		return "", time.Time{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sum)
	if err != nil || !hmac.Equal(got, c.mac(slot, deadline, payload)) {
		return "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(deadline, 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return payload, time.UnixMilli(ms), true
}

func (c *AuthCache) mac(slot, deadline, payload string) []byte {
	m := hmac.New(sha256.New, c.secret)
	for _, part := range []string{slot, deadline} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	m.Write([]byte(payload))
	return m.Sum(nil)
}

func authSlot(keyHash string) string { return "gw:auth:" + keyHash }

// Get implements gateway.AuthCache.
func (c *AuthCache) Get(ctx context.Context, keyHash string) (gateway.Principal, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	slot := authSlot(keyHash)
	v, err := c.client.Get(ctx, slot).Result()
	if errors.Is(err, goredis.Nil) {
		return gateway.Principal{}, false, nil
	}
	if err != nil {
		return gateway.Principal{}, false, fmt.Errorf("redis auth cache: %w", err)
	}
	payload, until, ok := c.unseal(slot, v)
	if !ok {
		// Not necessarily an attack: a replica with another
		// AUTH_CACHE_SECRET (mid-rotation, or misconfigured) writes such
		// entries too. Either way it is not trusted, and it is said.
		c.log.WarnContext(ctx, "auth cache entry not sealed with this gateway's AUTH_CACHE_SECRET; ignored, the key is checked with accounts")
		return gateway.Principal{}, false, nil
	}
	if !time.Now().Before(until) {
		// Redis should have dropped it. Kept past its deadline on purpose,
		// or read by a replica whose clock runs ahead of the writer's:
		// either way a miss is safe, and costs one call to accounts.
		return gateway.Principal{}, false, nil
	}
	if payload == rejected {
		return gateway.Principal{}, false, gateway.ErrUnauthorized
	}
	var p gateway.Principal
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		// A value written by another version: treat as a miss.
		return gateway.Principal{}, false, nil
	}
	return p, true, nil
}

// Put implements gateway.AuthCache.
func (c *AuthCache) Put(ctx context.Context, keyHash string, p *gateway.Principal, until time.Time) error {
	v := rejected
	if p != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		v = string(b)
	}
	// Both bounds go to Redis: the time left by this process's monotonic
	// clock, which holds however far the clocks disagree, and the deadline
	// by its wall clock, which holds however late the write is applied.
	left := time.Until(until).Milliseconds()
	if left <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	slot := authSlot(keyHash)
	if err := putUntil.Run(ctx, c.client, []string{slot}, c.seal(slot, until, v), left, until.UnixMilli()).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis auth cache: %w", err)
	}
	return nil
}

// putUntil sets KEYS[1] to ARGV[1] for at most ARGV[2] ms from when Redis
// runs it and never past the Unix time ARGV[3] (ms). A SET with a TTL alone
// starts the TTL when Redis applies it: a write sent while Redis is
// stalled (a pause, a long fork) is applied when it recovers, after the
// client gave up on it, and would keep a key's answer, perhaps revoked
// since, for a whole TTL more. A write whose deadline has passed
// is dropped.
var putUntil = goredis.NewScript(`
local t = redis.call("TIME")
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ttl = math.min(tonumber(ARGV[2]), tonumber(ARGV[3]) - now)
if ttl <= 0 then
  return false
end
redis.call("SET", KEYS[1], ARGV[1], "PX", ttl)
return 1
`)
