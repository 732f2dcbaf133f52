package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
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
	// Put caches a principal, or a rejection when p is nil.
	Put(ctx context.Context, keyHash string, p *Principal, ttl time.Duration) error
}

// CachedAccounts authenticates through two short-lived caches in front of
// the accounts service: one in this process, which saves the Redis round
// trip on a busy key, and the shared one (Redis), which saves the call to
// accounts. An answer can be as old as both TTLs together, so their sum
// bounds how late a revocation takes effect and must stay below the 5 s the
// platform promises. A shared cache that fails is bypassed: authentication
// then costs a call to accounts but keeps working.
type CachedAccounts struct {
	Accounts Accounts
	Cache    AuthCache
	TTL      time.Duration
	// LocalTTL is how long this process trusts an answer by itself.
	LocalTTL time.Duration
	Log      *slog.Logger

	local localAuthCache
	// misses lets one lookup per key run at a time: when a busy key's
	// local entry expires, the requests that arrive meanwhile wait for that
	// lookup instead of each asking Redis (and accounts) again.
	misses singleflight.Group
}

// MaxStaleness is the longest a revoked key can keep working.
func (c *CachedAccounts) MaxStaleness() time.Duration { return c.TTL + c.LocalTTL }

func (c *CachedAccounts) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(secret))
	keyHash := hex.EncodeToString(sum[:])

	if p, err, ok := c.local.get(keyHash, time.Now()); ok {
		return p, err
	}
	lookup := c.misses.DoChan(keyHash, func() (any, error) {
		// Shared by every request waiting on this key, so one caller
		// going away must not fail the others; the accounts client's own
		// timeout bounds the call.
		p, err := c.authenticate(context.WithoutCancel(ctx), secret, keyHash)
		if err == nil || errors.Is(err, ErrUnauthorized) {
			c.local.put(keyHash, p, err, time.Now().Add(c.LocalTTL))
		}
		return p, err
	})
	select {
	case r := <-lookup:
		return r.Val.(Principal), r.Err
	case <-ctx.Done():
		return Principal{}, ctx.Err()
	}
}

func (c *CachedAccounts) authenticate(ctx context.Context, secret, keyHash string) (Principal, error) {
	p, ok, err := c.Cache.Get(ctx, keyHash)
	switch {
	case errors.Is(err, ErrUnauthorized):
		return Principal{}, err
	case err != nil:
		c.Log.WarnContext(ctx, "auth cache unavailable, asking accounts", "err", err)
	case ok:
		return p, nil
	}

	p, err = c.Accounts.Authenticate(ctx, secret)
	switch {
	case err == nil:
		c.put(ctx, keyHash, &p)
		return p, nil
	case errors.Is(err, ErrUnauthorized):
		// Remembering rejections keeps a flood of bad keys off accounts.
		c.put(ctx, keyHash, nil)
		return Principal{}, err
	default:
		return Principal{}, err
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

func (c *CachedAccounts) put(ctx context.Context, keyHash string, p *Principal) {
	if err := c.Cache.Put(ctx, keyHash, p, c.TTL); err != nil {
		c.Log.WarnContext(ctx, "auth cache unavailable, not caching", "err", err)
	}
}
