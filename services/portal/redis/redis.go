// Package redis keeps the portal's sign-in and sign-up counters and its
// sealed new API keys in Redis, so every replica shares them.
package redis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/esimplatform/esim/libs/redisurl"

	goredis "github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/services/portal"
)

// Connect opens a client with short timeouts: a sign-in waits on Redis,
// and a dead Redis must answer an error page quickly, not hang it.
func Connect(redisURL string) (*goredis.Client, error) {
	opts, err := redisurl.Parse(redisURL)
	if err != nil {
		return nil, fmt.Errorf("parse REDIS_URL: %w", err)
	}
	opts.DialTimeout = commandTimeout
	opts.ReadTimeout = commandTimeout
	opts.WriteTimeout = commandTimeout
	opts.PoolTimeout = commandTimeout
	opts.MaxRetries = 1
	return goredis.NewClient(opts), nil
}

const commandTimeout = 500 * time.Millisecond

// SignInLimiter is portal.SignInLimiter in fixed windows: the first
// attempt of a window creates its counter with the window as its expiry;
// the counter then grows by claims and shrinks by releases until it
// expires.
type SignInLimiter struct {
	rdb    *goredis.Client
	limits portal.SignInLimits
}

var _ portal.SignInLimiter = (*SignInLimiter)(nil)

// NewSignInLimiter counts on rdb.
func NewSignInLimiter(rdb *goredis.Client, limits portal.SignInLimits) *SignInLimiter {
	return &SignInLimiter{rdb: rdb, limits: limits}
}

// EmailKey is the counter of email's attempts: its SHA-256, so Redis
// holds no address book.
func EmailKey(email string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(email))))
	return "portal:signin:email:" + hex.EncodeToString(sum[:])
}

// AddressKey is the counter of a client address's sign-in attempts.
func AddressKey(addr string) string { return "portal:signin:addr:" + addr }

// SignUpAddressKey is the counter of a client address's sign-ups and
// invite acceptances.
func SignUpAddressKey(addr string) string { return "portal:signup:addr:" + addr }

// claim takes one attempt on every counter of KEYS (ARGV[1] is the window
// in milliseconds, ARGV[1+i] the limit of KEYS[i]) or, when any is at its
// limit, on none, and answers the milliseconds until the fullest such
// window ends (0: claimed). Checking and counting in one script is what
// makes the limit exact under parallel attempts: Redis runs a script
// whole, with no other command in between. A counter found without an
// expiry (none is ever left so, but a lost one would lock its owner out
// for good) gets the window.
var claim = goredis.NewScript(`
local window = tonumber(ARGV[1])
local wait = 0
for i, key in ipairs(KEYS) do
  local n = tonumber(redis.call("GET", key) or "0")
  if n >= tonumber(ARGV[i + 1]) then
    local ttl = redis.call("PTTL", key)
    if ttl < 0 then
      redis.call("PEXPIRE", key, window)
      ttl = window
    end
    wait = math.max(wait, ttl, 1)
  end
end
if wait > 0 then
  return wait
end
for _, key in ipairs(KEYS) do
  if redis.call("INCR", key) == 1 or redis.call("PTTL", key) < 0 then
    redis.call("PEXPIRE", key, window)
  end
end
return 0
`)

// release gives one attempt back on every counter of KEYS that still
// holds one. A counter whose window ended meanwhile is left alone: DECR
// would make it anew, negative and without an expiry.
var release = goredis.NewScript(`
for _, key in ipairs(KEYS) do
  if tonumber(redis.call("GET", key) or "0") > 0 then
    redis.call("DECR", key)
  end
end
return 0
`)

// runClaim claims one attempt on each counter.
func runClaim(ctx context.Context, rdb *goredis.Client, window time.Duration, counters ...counter) (bool, time.Duration, error) {
	keys := make([]string, len(counters))
	args := []any{window.Milliseconds()}
	for i, c := range counters {
		keys[i] = c.key
		args = append(args, c.limit)
	}
	wait, err := claim.Run(ctx, rdb, keys, args...).Int64()
	if err != nil {
		return false, 0, fmt.Errorf("claim an attempt: %w", err)
	}
	if wait > 0 {
		return false, time.Duration(wait) * time.Millisecond, nil
	}
	return true, 0, nil
}

// Claim implements portal.SignInLimiter. Both counters take every
// attempt, so guessing many passwords for one email from many addresses,
// or one password for many emails from one address, both stop.
func (l *SignInLimiter) Claim(ctx context.Context, email, addr string) (bool, time.Duration, error) {
	return runClaim(ctx, l.rdb, l.limits.Window, l.counters(email, addr)...)
}

// Release implements portal.SignInLimiter.
func (l *SignInLimiter) Release(ctx context.Context, email, addr string) error {
	cs := l.counters(email, addr)
	if err := release.Run(ctx, l.rdb, []string{cs[0].key, cs[1].key}).Err(); err != nil {
		return fmt.Errorf("give back a sign-in attempt: %w", err)
	}
	return nil
}

type counter struct {
	key   string
	limit int
}

func (l *SignInLimiter) counters(email, addr string) []counter {
	return []counter{{EmailKey(email), l.limits.PerEmail}, {AddressKey(addr), l.limits.PerAddress}}
}

// SignUpLimiter is portal.SignUpLimiter in fixed windows, as
// SignInLimiter's.
type SignUpLimiter struct {
	rdb    *goredis.Client
	limits portal.SignUpLimits
}

var _ portal.SignUpLimiter = (*SignUpLimiter)(nil)

// NewSignUpLimiter counts on rdb.
func NewSignUpLimiter(rdb *goredis.Client, limits portal.SignUpLimits) *SignUpLimiter {
	return &SignUpLimiter{rdb: rdb, limits: limits}
}

// Claim implements portal.SignUpLimiter.
func (l *SignUpLimiter) Claim(ctx context.Context, addr string) (bool, time.Duration, error) {
	return runClaim(ctx, l.rdb, l.limits.Window, counter{SignUpAddressKey(addr), l.limits.PerAddress})
}

// NewKeys is portal.NewKeys: each sealed secret under a key of its own
// that expires with it.
type NewKeys struct{ rdb *goredis.Client }

var _ portal.NewKeys = (*NewKeys)(nil)

// NewNewKeys keeps new keys on rdb.
func NewNewKeys(rdb *goredis.Client) *NewKeys { return &NewKeys{rdb: rdb} }

// NewKeyKey is where the sealed new key id waits.
func NewKeyKey(id string) string { return "portal:newkey:" + id }

// Put implements portal.NewKeys.
func (k *NewKeys) Put(ctx context.Context, id string, sealed []byte, ttl time.Duration) error {
	if err := k.rdb.Set(ctx, NewKeyKey(id), sealed, ttl).Err(); err != nil {
		return fmt.Errorf("keep a new key: %w", err)
	}
	return nil
}

// Take implements portal.NewKeys. GETDEL reads and deletes in one
// command: of two requests racing for the page, one gets the key.
func (k *NewKeys) Take(ctx context.Context, id string) ([]byte, error) {
	b, err := k.rdb.GetDel(ctx, NewKeyKey(id)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, portal.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("take a new key: %w", err)
	}
	return b, nil
}
