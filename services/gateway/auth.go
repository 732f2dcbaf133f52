package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// AuthCache remembers recent authentication outcomes under a hash of the
// key, so the plaintext key is never stored outside the accounts service.
type AuthCache interface {
	// Get returns the cached principal, or ok=false on a miss. A cached
	// rejection comes back as ErrUnauthorized.
	Get(ctx context.Context, keyHash string) (p Principal, ok bool, err error)
	// Put caches a principal, or a rejection when p is nil, until the
	// instant until and no longer, however late the write reaches the
	// store: a write held up by a stalled store and applied on its
	// recovery must not start a fresh TTL for an answer that may have
	// been revoked since.
	Put(ctx context.Context, keyHash string, p *Principal, until time.Time) error
}

// CachedAccounts authenticates through two short-lived caches in front of
// the accounts service: one in this process, which saves the Redis round
// trip on a busy key, and the shared one (Redis), which saves the call to
// accounts. An answer can be as old as both TTLs together, so their sum
// bounds how late a revocation takes effect and must stay below the 5 s the
// platform promises. Both TTLs run from the start of the lookup that found
// the answer, not from its end, so a slow Redis or accounts call cannot
// stretch them. A shared cache that fails is bypassed for a cool-down:
// authentication then costs a call to accounts but keeps working, and a
// hung Redis costs its timeout once per cool-down, not once per lookup.
type CachedAccounts struct {
	Accounts Accounts
	Cache    AuthCache
	TTL      time.Duration
	// LocalTTL is how long this process trusts an answer by itself.
	LocalTTL time.Duration
	// Cooldown is how long the shared cache is bypassed after it fails
	// (zero: one second).
	Cooldown time.Duration
	Log      *slog.Logger

	shared breaker
	local  localAuthCache
	// misses lets one lookup per key run at a time: when a busy key's
	// local entry expires, the requests that arrive meanwhile wait for that
	// lookup instead of each asking Redis (and accounts) again.
	misses singleflight.Group
}

// errLookupPanicked is the error of a key's lookup that panicked.
var errLookupPanicked = errors.New("authenticating a key panicked")

// maxKeyLength bounds a presented key well above today's (43 characters
// for a sandbox key), so accounts can lengthen its keys without the
// gateway.
const maxKeyLength = 128

// plausibleKey tells a string that could be a key from one that cannot: an
// environment prefix, then letters and digits only, of bounded length.
// Only accounts knows the exact form; this spares the shared cache and
// accounts the lookups of anything else a client puts in the header, which
// no one is charged for (a refused key has no allowance) and which could
// otherwise be made up by the thousand, at up to 64 KiB each.
func plausibleKey(s string) bool {
	rest, ok := strings.CutPrefix(s, "sk_live_")
	if !ok {
		rest, ok = strings.CutPrefix(s, "sk_sandbox_")
	}
	if !ok || rest == "" || len(s) > maxKeyLength {
		return false
	}
	for i := range len(rest) {
		c := rest[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// Authenticate implements Accounts.
func (c *CachedAccounts) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if !plausibleKey(secret) {
		return Principal{}, ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(secret))
	keyHash := hex.EncodeToString(sum[:])

	if p, err, ok := c.local.get(keyHash, time.Now()); ok {
		return p, err
	}
	lookup := c.misses.DoChan(keyHash, func() (_ any, err error) {
		// singleflight re-raises a panic of DoChan's function on a
		// goroutine of its own, where nothing can recover it: a fault in
		// one key's lookup would take the gateway down. Every request
		// waiting on this key fails with it instead, answered as ours.
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("%w: %v\n%s", errLookupPanicked, v, debug.Stack())
			}
		}()
		// Shared by every request waiting on this key, so one caller
		// going away must not fail the others; the accounts client's own
		// timeout bounds the call.
		start := time.Now()
		p, err := c.authenticate(context.WithoutCancel(ctx), secret, keyHash, start)
		if err == nil || errors.Is(err, ErrUnauthorized) {
			c.local.put(keyHash, p, err, start.Add(c.LocalTTL))
		}
		return p, err
	})
	select {
	case r := <-lookup:
		p, _ := r.Val.(Principal)
		return p, r.Err
	case <-ctx.Done():
		return Principal{}, ctx.Err()
	}
}

// authenticate asks the shared cache, then accounts. start is when the
// lookup began: an answer found now may have been true only then.
func (c *CachedAccounts) authenticate(ctx context.Context, secret, keyHash string, start time.Time) (Principal, error) {
	shared := c.shared.allow(start, c.cooldown())
	if shared {
		p, ok, err := c.Cache.Get(ctx, keyHash)
		switch {
		case err == nil || errors.Is(err, ErrUnauthorized):
			c.sharedAnswered(ctx)
			if err != nil {
				return Principal{}, err
			}
			if ok {
				return p, nil
			}
		default:
			c.sharedFailed(ctx, err)
			shared = false
		}
	}

	p, err := c.Accounts.Authenticate(ctx, secret)
	switch {
	case err == nil:
		if shared {
			c.put(ctx, keyHash, &p, start)
		}
		return p, nil
	case errors.Is(err, ErrUnauthorized):
		// Remembering rejections keeps a flood of bad keys off accounts.
		if shared {
			c.put(ctx, keyHash, nil, start)
		}
		return Principal{}, err
	default:
		return Principal{}, err
	}
}

func (c *CachedAccounts) cooldown() time.Duration { return cooldownOr(c.Cooldown) }

func (c *CachedAccounts) sharedAnswered(ctx context.Context) {
	if c.shared.succeeded() {
		c.Log.InfoContext(ctx, "auth cache answers again")
	}
}

func (c *CachedAccounts) sharedFailed(ctx context.Context, err error) {
	if c.shared.failed(time.Now(), c.cooldown()) {
		c.Log.WarnContext(ctx, "auth cache unavailable, asking accounts", "err", err, "cooldown", c.cooldown().String())
	}
}

// localAuthCache is the in-process layer. It is bounded by dropping
// everything when full: simple, and a refill costs one Redis round trip per
// active key.
type localAuthCache struct {
	mu      sync.Mutex
	entries map[string]localAuth
}

type localAuth struct {
	principal Principal
	err       error
	expires   time.Time
}

const localAuthCacheSize = 10_000

func (l *localAuthCache) get(keyHash string, now time.Time) (Principal, error, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[keyHash]
	if !ok || now.After(e.expires) {
		return Principal{}, nil, false
	}
	return e.principal, e.err, true
}

func (l *localAuthCache) put(keyHash string, p Principal, err error, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil || len(l.entries) >= localAuthCacheSize {
		l.entries = make(map[string]localAuth)
	}
	l.entries[keyHash] = localAuth{principal: p, err: err, expires: expires}
}

func (c *CachedAccounts) put(ctx context.Context, keyHash string, p *Principal, start time.Time) {
	if err := c.Cache.Put(ctx, keyHash, p, start.Add(c.TTL)); err != nil {
		c.sharedFailed(ctx, err)
	}
}
