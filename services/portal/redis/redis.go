// Package redis keeps the portal's sign-in counters in Redis, so every
// replica shares them.
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
// the counter then only grows until it expires.
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

// AddressKey is the counter of a client address's attempts.
func AddressKey(addr string) string { return "portal:signin:addr:" + addr }

// incr counts one failure on key. EXPIRE ... NX sets the window on the first attempt only;
// it also heals a counter left without one (a failure between the two
// commands), which would otherwise lock its owner out for good.
var incr = goredis.NewScript(`
local n = redis.call("INCR", KEYS[1])
if n == 1 then
  redis.call("PEXPIRE", KEYS[1], ARGV[1])
elseif redis.call("PTTL", KEYS[1]) < 0 then
  redis.call("PEXPIRE", KEYS[1], ARGV[1])
end
return n
`)

// Check implements portal.SignInLimiter.
func (l *SignInLimiter) Check(ctx context.Context, email, addr string) (bool, time.Duration, error) {
	allowed, wait := true, time.Duration(0)
	for _, c := range l.counters(email, addr) {
		n, err := l.rdb.Get(ctx, c.key).Int()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			return false, 0, fmt.Errorf("read failed sign-ins: %w", err)
		}
		if n >= c.limit {
			ttl, err := l.rdb.PTTL(ctx, c.key).Result()
			if err != nil {
				return false, 0, fmt.Errorf("read failed sign-ins: %w", err)
			}
			allowed, wait = false, max(wait, ttl)
		}
	}
	return allowed, wait, nil
}

// Failed implements portal.SignInLimiter. Both counters grow on every
// failure, so guessing many passwords for one email from many addresses,
// or one password for many emails from one address, both stop.
func (l *SignInLimiter) Failed(ctx context.Context, email, addr string) error {
	for _, c := range l.counters(email, addr) {
		if err := incr.Run(ctx, l.rdb, []string{c.key}, l.limits.Window.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("count a failed sign-in: %w", err)
		}
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
