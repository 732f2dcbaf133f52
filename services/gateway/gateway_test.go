package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/gateway"
)

// Fakes are allowed here: these tests pin the gateway's own rules, not the
// stores behind them (those run against real Redis in redis/ and server/).

type countingAccounts struct {
	calls int
	valid map[string]gateway.Principal
	err   error
}

func (a *countingAccounts) Authenticate(_ context.Context, secret string) (gateway.Principal, error) {
	a.calls++
	if a.err != nil {
		return gateway.Principal{}, a.err
	}
	p, ok := a.valid[secret]
	if !ok {
		return gateway.Principal{}, gateway.ErrUnauthorized
	}
	return p, nil
}

type mapCache struct {
	entries map[string]*gateway.Principal
	broken  bool
}

func (c *mapCache) Get(_ context.Context, k string) (gateway.Principal, bool, error) {
	if c.broken {
		return gateway.Principal{}, false, errors.New("connection refused")
	}
	p, ok := c.entries[k]
	if !ok {
		return gateway.Principal{}, false, nil
	}
	if p == nil {
		return gateway.Principal{}, false, gateway.ErrUnauthorized
	}
	return *p, true, nil
}

func (c *mapCache) Put(_ context.Context, k string, p *gateway.Principal, _ time.Time) error {
	if c.broken {
		return errors.New("connection refused")
	}
	c.entries[k] = p
	return nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newCached(accts *countingAccounts, cache *mapCache) *gateway.CachedAccounts {
	return &gateway.CachedAccounts{Accounts: accts, Cache: cache, TTL: time.Second, Log: quiet}
}

func TestCachedAccountsAsksAccountsOncePerKey(t *testing.T) {
	want := gateway.Principal{AccountID: "a1", Environment: gateway.Sandbox, KeyID: "k1", Currency: "USD"}
	accts := &countingAccounts{valid: map[string]gateway.Principal{"sk_sandbox_good": want}}
	c := newCached(accts, &mapCache{entries: map[string]*gateway.Principal{}})
	for range 3 {
		got, err := c.Authenticate(context.Background(), "sk_sandbox_good")
		if err != nil || got != want {
			t.Fatalf("got %+v, %v", got, err)
		}
	}
	if accts.calls != 1 {
		t.Fatalf("accounts called %d times, want 1", accts.calls)
	}
}

func TestCachedAccountsRemembersRejections(t *testing.T) {
	accts := &countingAccounts{}
	c := newCached(accts, &mapCache{entries: map[string]*gateway.Principal{}})
	for range 2 {
		if _, err := c.Authenticate(context.Background(), "sk_live_bogus"); !errors.Is(err, gateway.ErrUnauthorized) {
			t.Fatalf("err = %v, want ErrUnauthorized", err)
		}
	}
	if accts.calls != 1 {
		t.Fatalf("accounts called %d times, want 1", accts.calls)
	}
}

func TestCachedAccountsKeepsWorkingWithoutCache(t *testing.T) {
	want := gateway.Principal{AccountID: "a1", KeyID: "k1"}
	accts := &countingAccounts{valid: map[string]gateway.Principal{"sk_live_x": want}}
	c := newCached(accts, &mapCache{broken: true})
	for range 2 {
		got, err := c.Authenticate(context.Background(), "sk_live_x")
		if err != nil || got != want {
			t.Fatalf("got %+v, %v", got, err)
		}
	}
	if accts.calls != 2 {
		t.Fatalf("accounts called %d times, want 2 (no cache)", accts.calls)
	}
}

func TestCachedAccountsNeverCachesUpstreamFailures(t *testing.T) {
	cache := &mapCache{entries: map[string]*gateway.Principal{}}
	accts := &countingAccounts{err: errors.New("accounts down")}
	c := newCached(accts, cache)
	if _, err := c.Authenticate(context.Background(), "sk_live_x"); err == nil || errors.Is(err, gateway.ErrUnauthorized) {
		t.Fatalf("err = %v, want the upstream failure", err)
	}
	if len(cache.entries) != 0 {
		t.Fatal("an upstream failure must not be cached as a rejection")
	}

	// Nor in the replica's own layer: once accounts is back, the next
	// request of the key asks it again and gets in.
	c.LocalTTL = time.Minute
	if _, err := c.Authenticate(context.Background(), "sk_live_x"); err == nil {
		t.Fatal("accounts down: no error")
	}
	accts.err = nil
	accts.valid = map[string]gateway.Principal{"sk_live_x": {KeyID: "k"}}
	if p, err := c.Authenticate(context.Background(), "sk_live_x"); err != nil || p.KeyID != "k" {
		t.Fatalf("accounts back: %+v, %v; want the key's principal", p, err)
	}
}

// Only what could be a key is looked up: anything else a client puts in
// the header is refused without touching the shared cache or accounts,
// however much of it comes.
func TestCachedAccountsRefusesWhatCannotBeAKeyWithoutLookup(t *testing.T) {
	accts := &countingAccounts{}
	cache := &mapCache{entries: map[string]*gateway.Principal{}}
	c := newCached(accts, cache)
	for _, secret := range []string{
		"", "nonsense", "sk_live_", "sk_test_abc", "SK_LIVE_abc", "sk_live_abc!", "sk_live_abc def",
		"sk_sandbox_" + strings.Repeat("a", 200), strings.Repeat("x", 60<<10), "sk_live_é",
	} {
		if _, err := c.Authenticate(context.Background(), secret); !errors.Is(err, gateway.ErrUnauthorized) {
			t.Errorf("%.40q: err = %v, want ErrUnauthorized", secret, err)
		}
	}
	if accts.calls != 0 || len(cache.entries) != 0 {
		t.Fatalf("%d accounts calls, %d cache entries; want none", accts.calls, len(cache.entries))
	}
	// A key of the right form is looked up, and its refusal cached.
	if _, err := c.Authenticate(context.Background(), "sk_live_0123456789abcdefABCDEF0123456789"); !errors.Is(err, gateway.ErrUnauthorized) || accts.calls != 1 {
		t.Fatalf("a well-formed unknown key: %v after %d calls, want ErrUnauthorized after 1", err, accts.calls)
	}
}

func TestLocalLimiterAllowsTheLimitThenRefuses(t *testing.T) {
	l := &gateway.LocalLimiter{}
	for i := range 3 {
		d, _ := l.Allow(context.Background(), "k", 3)
		if !d.Allowed || d.Remaining != 2-i || d.Limit != 3 {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	d, _ := l.Allow(context.Background(), "k", 3)
	if d.Allowed || d.ResetAfter <= 0 {
		t.Fatalf("4th request: %+v, want refused with a reset time", d)
	}
	if d, _ := l.Allow(context.Background(), "other", 3); !d.Allowed {
		t.Fatal("keys must not share an allowance")
	}
}

type failingLimiter struct{ calls int }

func (f *failingLimiter) Allow(context.Context, string, int) (gateway.RateDecision, error) {
	f.calls++
	return gateway.RateDecision{}, errors.New("redis: connection refused")
}

func TestFailoverLimiterLimitsLocallyAndBacksOff(t *testing.T) {
	shared := &failingLimiter{}
	f := &gateway.FailoverLimiter{Shared: shared, Local: &gateway.LocalLimiter{}, Log: quiet, Cooldown: time.Hour}
	allowed := 0
	for range 5 {
		d, err := f.Allow(context.Background(), "k", 2)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("allowed %d of 5 with limit 2", allowed)
	}
	if shared.calls != 1 {
		t.Fatalf("shared limiter tried %d times during the cooldown, want 1", shared.calls)
	}
}

func TestValidationErrorIsErrInvalid(t *testing.T) {
	err := error(gateway.Invalid("limit", "too big"))
	if !errors.Is(err, gateway.ErrInvalid) || err.Error() != "invalid request: limit: too big" {
		t.Fatalf("got %v", err)
	}
}

func TestCachedAccountsLocalLayerSparesTheSharedCache(t *testing.T) {
	want := gateway.Principal{AccountID: "a1", KeyID: "k1"}
	accts := &countingAccounts{valid: map[string]gateway.Principal{"sk_live_x": want}}
	// A broken shared cache makes every miss of the local layer visible as a
	// call to accounts.
	c := &gateway.CachedAccounts{Accounts: accts, Cache: &mapCache{broken: true}, TTL: time.Second, LocalTTL: 50 * time.Millisecond, Log: quiet}
	for range 3 {
		if _, err := c.Authenticate(context.Background(), "sk_live_x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Authenticate(context.Background(), "sk_live_other"); !errors.Is(err, gateway.ErrUnauthorized) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := c.Authenticate(context.Background(), "sk_live_other"); !errors.Is(err, gateway.ErrUnauthorized) {
		t.Fatalf("unknown key, cached: %v", err)
	}
	if accts.calls != 2 {
		t.Fatalf("accounts called %d times, want 2 (one per key)", accts.calls)
	}
	time.Sleep(60 * time.Millisecond)
	if _, err := c.Authenticate(context.Background(), "sk_live_x"); err != nil {
		t.Fatal(err)
	}
	if accts.calls != 3 {
		t.Fatalf("accounts called %d times after the local TTL, want 3", accts.calls)
	}
}

// blockingAccounts answers once release is closed, counting the calls that
// reached it.
type blockingAccounts struct {
	calls   atomic.Int32
	release chan struct{}
	p       gateway.Principal
}

func (a *blockingAccounts) Authenticate(ctx context.Context, _ string) (gateway.Principal, error) {
	a.calls.Add(1)
	select {
	case <-a.release:
		return a.p, nil
	case <-ctx.Done():
		return gateway.Principal{}, ctx.Err()
	}
}

func TestCachedAccountsAsksOnceForConcurrentMissesOfOneKey(t *testing.T) {
	accts := &blockingAccounts{release: make(chan struct{}), p: gateway.Principal{AccountID: "a1", KeyID: "k1"}}
	c := &gateway.CachedAccounts{Accounts: accts, Cache: &mapCache{broken: true}, TTL: time.Second, LocalTTL: time.Second, Log: quiet}
	const callers = 20
	errs := make(chan error, callers)
	authenticate := func(ctx context.Context) {
		p, err := c.Authenticate(ctx, "sk_live_busy")
		if err == nil && p != accts.p {
			err = fmt.Errorf("principal %+v", p)
		}
		errs <- err
	}
	// The first caller starts the lookup, then gives up while it runs: it
	// gets its own cancellation at once. The others, which joined the
	// lookup meanwhile, get the answer it finished with.
	impatient, cancel := context.WithCancel(context.Background())
	impatientErr := make(chan error, 1)
	go func() {
		_, err := c.Authenticate(impatient, "sk_live_busy")
		impatientErr <- err
	}()
	for accts.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for range callers - 1 {
		go authenticate(context.Background())
	}
	time.Sleep(20 * time.Millisecond) // let them join the lookup
	cancel()
	if err := <-impatientErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}
	close(accts.release)
	for range callers - 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := accts.calls.Load(); n != 1 {
		t.Fatalf("accounts called %d times for %d concurrent misses, want 1", n, callers)
	}
}

// countingLimiter allows a key up to its limit and records the limits it
// was asked to apply.
type countingLimiter struct {
	used   map[string]int
	limits []int
}

func (l *countingLimiter) Allow(_ context.Context, key string, perMinute int) (gateway.RateDecision, error) {
	if l.used == nil {
		l.used = map[string]int{}
	}
	l.limits = append(l.limits, perMinute)
	if l.used[key] >= perMinute {
		return gateway.RateDecision{Limit: perMinute, ResetAfter: time.Minute}, nil
	}
	l.used[key]++
	return gateway.RateDecision{Allowed: true, Limit: perMinute, Remaining: perMinute - l.used[key]}, nil
}

// byKey answers a fixed principal per secret; any other secret is refused.
type byKey map[string]gateway.Principal

func (k byKey) Authenticate(_ context.Context, secret string) (gateway.Principal, error) {
	if p, ok := k[secret]; ok {
		return p, nil
	}
	return gateway.Principal{}, gateway.ErrUnauthorized
}

// The gate charges a key to its account's own limit, or to the default
// where the account has none; over it, ErrRateLimited with the decision;
// a refused key is never charged.
func TestGateChargesEachKeyToItsAccountsLimit(t *testing.T) {
	limiter := &countingLimiter{}
	g := gateway.Gate{
		Accounts: byKey{
			"own":     {AccountID: "a", KeyID: "k1", RateLimitPerMinute: 2},
			"default": {AccountID: "b", KeyID: "k2"},
		},
		Limiter:          limiter,
		DefaultRateLimit: 3,
	}
	ctx := context.Background()
	for i, want := range []error{nil, nil, gateway.ErrRateLimited} {
		p, d, err := g.Admit(ctx, "own")
		if !errors.Is(err, want) || p.KeyID != "k1" || d.Limit != 2 {
			t.Fatalf("own limit, request %d: %+v, %+v, %v; want %v at limit 2", i+1, p, d, err, want)
		}
		if want != nil && (d.Allowed || d.ResetAfter == 0) {
			t.Errorf("refused request's decision %+v does not say when to retry", d)
		}
	}
	if _, d, err := g.Admit(ctx, "default"); err != nil || d.Limit != 3 || d.Remaining != 2 {
		t.Fatalf("default limit: %+v, %v; want limit 3 with 2 left", d, err)
	}
	calls := len(limiter.limits)
	if _, d, err := g.Admit(ctx, "nonsense"); !errors.Is(err, gateway.ErrUnauthorized) || d != (gateway.RateDecision{}) {
		t.Fatalf("refused key: %+v, %v", d, err)
	}
	if len(limiter.limits) != calls {
		t.Error("a refused key was charged to an allowance")
	}
}
