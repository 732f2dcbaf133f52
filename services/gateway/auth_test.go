package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/gateway"
)

// spyCache is a shared cache that counts its calls. While broken it fails
// them; while hanging, Get waits for release and then misses; delay slows
// every Get that answers.
type spyCache struct {
	gets, puts atomic.Int32
	broken     atomic.Bool
	hanging    atomic.Bool
	release    chan struct{}
	delay      time.Duration

	mu      sync.Mutex
	entries map[string]*gateway.Principal
	until   []time.Time
}

func (c *spyCache) Get(_ context.Context, k string) (gateway.Principal, bool, error) {
	c.gets.Add(1)
	if c.hanging.Load() {
		<-c.release
		return gateway.Principal{}, false, nil
	}
	if c.broken.Load() {
		return gateway.Principal{}, false, errors.New("redis: i/o timeout")
	}
	time.Sleep(c.delay)
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.entries[k]
	switch {
	case !ok:
		return gateway.Principal{}, false, nil
	case p == nil:
		return gateway.Principal{}, false, gateway.ErrUnauthorized
	}
	return *p, true, nil
}

func (c *spyCache) Put(_ context.Context, k string, p *gateway.Principal, until time.Time) error {
	c.puts.Add(1)
	if c.broken.Load() {
		return errors.New("redis: i/o timeout")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*gateway.Principal{}
	}
	c.entries[k] = p
	c.until = append(c.until, until)
	return nil
}

// anyKey accepts every secret, after delay.
type anyKey struct {
	calls atomic.Int32
	delay time.Duration
}

func (a *anyKey) Authenticate(_ context.Context, secret string) (gateway.Principal, error) {
	a.calls.Add(1)
	time.Sleep(a.delay)
	return gateway.Principal{AccountID: "acc", KeyID: "key-" + secret}, nil
}

// A shared cache that failed is left alone for a cool-down. Against a hung
// Redis each Get and Put costs a read timeout, and every lookup paid both.
func TestCachedAccountsBypassesAFailedSharedCacheForTheCooldown(t *testing.T) {
	cache := &spyCache{}
	cache.broken.Store(true)
	accts := &anyKey{}
	c := &gateway.CachedAccounts{Accounts: accts, Cache: cache, TTL: time.Second, LocalTTL: time.Second, Log: quiet}
	for _, secret := range []string{"sk_live_a", "sk_live_b", "sk_live_c"} {
		if _, err := c.Authenticate(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
	}
	if g, p := cache.gets.Load(), cache.puts.Load(); g != 1 || p != 0 {
		t.Fatalf("broken cache got %d Gets and %d Puts for 3 keys; want 1 and 0", g, p)
	}
	if n := accts.calls.Load(); n != 3 {
		t.Fatalf("accounts asked %d times, want 3", n)
	}
}

// When the cool-down ends one lookup probes the shared cache; the others
// ask accounts meanwhile rather than queue behind a Redis that may still
// hang.
// onlyOneProbe makes n calls at once just after a store's cool-down ended,
// with the store hanging: all but one must be answered without it, and
// only that one, the probe, may have reached it (reached counts those
// since the cool-down). release lets the store answer the probe.
func onlyOneProbe(t *testing.T, n int, call func(i int) error, reached func() int64, release func()) {
	t.Helper()
	done := make(chan error, n)
	for i := range n {
		go func() { done <- call(i) }()
	}
	deadline := time.After(10 * time.Second)
	for range n - 1 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			release()
			t.Fatalf("calls stuck behind a hung store; %d reached it (want 1 probe)", reached())
		}
	}
	if got := reached(); got != 1 {
		t.Fatalf("%d calls reached the store after the cool-down, want 1 probe", got)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCachedAccountsProbesTheSharedCacheOnceAfterTheCooldown(t *testing.T) {
	cache := &spyCache{release: make(chan struct{})}
	cache.broken.Store(true)
	const cooldown = 20 * time.Millisecond
	c := &gateway.CachedAccounts{Accounts: &anyKey{}, Cache: cache, TTL: time.Second, LocalTTL: time.Second, Cooldown: cooldown, Log: quiet}
	if _, err := c.Authenticate(context.Background(), "sk_live_first"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * cooldown)
	cache.hanging.Store(true)

	onlyOneProbe(t, 20, func(i int) error {
		_, err := c.Authenticate(context.Background(), fmt.Sprint("sk_live_", i))
		return err
	}, func() int64 { return int64(cache.gets.Load()) - 1 }, func() {
		cache.hanging.Store(false)
		cache.broken.Store(false)
		close(cache.release)
	})
	// The probe answered: the cache is trusted again.
	if _, err := c.Authenticate(context.Background(), "sk_live_after"); err != nil {
		t.Fatal(err)
	}
	if n := cache.gets.Load(); n != 3 {
		t.Fatalf("cache asked %d times in all, want 3 (failure, probe, next lookup)", n)
	}
}

// Both TTLs run from the start of the lookup that found the answer. Run
// from its end, a slow Redis or accounts call stretched them, and with
// them how long a revoked key keeps working past 1.5 x AUTH_CACHE_TTL.
func TestCachedAccountsTTLsRunFromTheStartOfTheLookup(t *testing.T) {
	const slow = 60 * time.Millisecond
	p := gateway.Principal{AccountID: "acc", KeyID: "key"}
	cache := &spyCache{delay: slow, entries: map[string]*gateway.Principal{}}
	accts := &anyKey{}
	c := &gateway.CachedAccounts{Accounts: accts, Cache: cache, TTL: time.Second, LocalTTL: slow, Log: quiet}

	// A hit found slowly is already as old as the local TTL when it
	// arrives: the next request asks Redis again.
	if _, err := c.Authenticate(context.Background(), "sk_live_cached"); err != nil {
		t.Fatal(err)
	}
	hash := cache.lastKey()
	cache.mu.Lock()
	cache.entries[hash] = &p
	cache.mu.Unlock()
	before := cache.gets.Load()
	if _, err := c.Authenticate(context.Background(), "sk_live_cached"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Authenticate(context.Background(), "sk_live_cached"); err != nil {
		t.Fatal(err)
	}
	if n := cache.gets.Load() - before; n != 2 {
		t.Fatalf("cache asked %d times for two requests after slow hits, want 2", n)
	}

	// An answer from a slow accounts call is cached in Redis until the
	// lookup's start plus the TTL.
	cache.delay = 0
	accts.delay = slow
	start := time.Now()
	if _, err := c.Authenticate(context.Background(), "sk_live_fresh"); err != nil {
		t.Fatal(err)
	}
	cache.mu.Lock()
	until := cache.until[len(cache.until)-1]
	cache.mu.Unlock()
	// The slow call took 60 ms; counted from its end the entry would
	// outlive the start by that much more.
	if until.After(start.Add(c.TTL + slow/2)) {
		t.Fatalf("cached until %s after the lookup began, want the TTL, %s", until.Sub(start), c.TTL)
	}
}

func (c *spyCache) lastKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		return k
	}
	return ""
}

// panicking is an accounts client with a fault.
type panicking struct{}

func (panicking) Authenticate(context.Context, string) (gateway.Principal, error) {
	panic("accounts client fault")
}

// A fault in one key's lookup fails the requests that wait on it, as an
// error of ours, and is not cached: singleflight would otherwise re-raise
// it where nothing can recover it, and the whole gateway would stop.
func TestCachedAccountsTurnsALookupPanicIntoAnError(t *testing.T) {
	c := &gateway.CachedAccounts{Accounts: panicking{}, Cache: &spyCache{}, TTL: time.Second, LocalTTL: time.Second, Log: quiet}
	for range 2 {
		p, err := c.Authenticate(context.Background(), "sk_sandbox_abc")
		if err == nil || errors.Is(err, gateway.ErrUnauthorized) || !strings.Contains(err.Error(), "accounts client fault") || p != (gateway.Principal{}) {
			t.Fatalf("Authenticate = %+v, %v; want an error of ours naming the panic", p, err)
		}
	}
}
