package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"
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

// CachedAccounts authenticates through a short-lived cache in front of the
// accounts service. The TTL bounds how late a revocation takes effect, so it
// must stay below the 5 s the platform promises. A cache that fails is
// bypassed: authentication then costs a call to accounts but keeps working.
type CachedAccounts struct {
	Accounts Accounts
	Cache    AuthCache
	TTL      time.Duration
	Log      *slog.Logger
}

func (c *CachedAccounts) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, ErrUnauthorized
	}
	sum := sha256.Sum256([]byte(secret))
	keyHash := hex.EncodeToString(sum[:])

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

func (c *CachedAccounts) put(ctx context.Context, keyHash string, p *Principal) {
	if err := c.Cache.Put(ctx, keyHash, p, c.TTL); err != nil {
		c.Log.WarnContext(ctx, "auth cache unavailable, not caching", "err", err)
	}
}
