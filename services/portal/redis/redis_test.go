package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/services/portal"
	"github.com/esimplatform/esim/services/portal/portaltest"
	"github.com/esimplatform/esim/services/portal/redis"
)

func random() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func connect(t *testing.T) *goredis.Client {
	t.Helper()
	rdb, err := redis.Connect(portaltest.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// The limits hold per email and per address, in fixed windows in Redis
// that end on their own; a refused attempt takes nothing.
func TestSignInLimiter(t *testing.T) {
	ctx := context.Background()
	rdb := connect(t)
	l := redis.NewSignInLimiter(rdb, portal.SignInLimits{PerEmail: 3, PerAddress: 5, Window: 2 * time.Second})

	email, addr := random()+"@example.com", "2001:db8::"+random()[:4]
	claim := func(email string) bool {
		t.Helper()
		ok, _, err := l.Claim(ctx, email, addr)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i := 1; i <= 3; i++ {
		if !claim(email) {
			t.Fatalf("attempt %d refused after %d failures", i, i-1)
		}
	}
	ok, wait, err := l.Claim(ctx, email, addr)
	if ok || err != nil || wait <= 0 || wait > 2*time.Second {
		t.Fatalf("the 4th attempt for one email: %v %s %v", ok, wait, err)
	}
	// The address has 3 attempts (the refused 4th took none); another
	// email may try twice more from it, then no email may.
	other := random() + "@example.com"
	for i := range 2 {
		if !claim(other) {
			t.Errorf("the address refused attempt %d of another email, before 5 attempts", i+1)
		}
	}
	if claim(random() + "@example.com") {
		t.Error("the address allowed a 6th attempt")
	}
	if n := rdb.Get(ctx, redis.AddressKey(addr)).Val(); n != "5" {
		t.Errorf("the address's counter is %s after 5 attempts and refusals", n)
	}
	// Counters are keyed by the email's hash, never the email itself.
	if n, _ := rdb.Exists(ctx, redis.EmailKey(email)).Result(); n != 1 {
		t.Errorf("no counter at %s", redis.EmailKey(email))
	}
	if ttl := rdb.PTTL(ctx, redis.EmailKey(email)).Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Errorf("counter TTL %s", ttl)
	}
	time.Sleep(2100 * time.Millisecond)
	if !claim(email) {
		t.Error("refused after the window")
	}
}

// Parallel claims: exactly the limit is taken, whatever the interleaving.
func TestSignInLimiterIsExactUnderParallelClaims(t *testing.T) {
	ctx := context.Background()
	l := redis.NewSignInLimiter(connect(t), portal.SignInLimits{PerEmail: 5, PerAddress: 1000, Window: time.Minute})
	email, addr := random()+"@example.com", "2001:db8::"+random()[:4]
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for range 50 {
		wg.Go(func() {
			ok, _, err := l.Claim(ctx, email, addr)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 5 {
		t.Errorf("%d of 50 parallel claims allowed, want 5", allowed)
	}
}

// A released attempt no longer counts: a sign-in that succeeds is never
// a step towards the limit.
func TestReleasedAttemptsDoNotCount(t *testing.T) {
	ctx := context.Background()
	rdb := connect(t)
	l := redis.NewSignInLimiter(rdb, portal.SignInLimits{PerEmail: 1, PerAddress: 1, Window: time.Minute})
	email, addr := random()+"@example.com", "2001:db8::"+random()[:4]
	for i := range 5 {
		if ok, _, err := l.Claim(ctx, email, addr); !ok || err != nil {
			t.Fatalf("claim %d after releases: %v %v", i+1, ok, err)
		}
		if err := l.Release(ctx, email, addr); err != nil {
			t.Fatal(err)
		}
	}
	// A release finds nothing to give back once the window ended: the
	// counter is not made anew, negative and without an expiry.
	gone := random() + "@example.com"
	if err := l.Release(ctx, gone, addr); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, redis.EmailKey(gone)).Result(); n != 0 {
		t.Errorf("a release made the counter %s", redis.EmailKey(gone))
	}
}

// A counter left without an expiry (by hand, or a lost command) is given
// the window when it is next claimed, so it cannot lock its owner out for
// good.
func TestCounterWithoutExpiryHeals(t *testing.T) {
	ctx := context.Background()
	rdb := connect(t)
	l := redis.NewSignInLimiter(rdb, portal.SignInLimits{PerEmail: 2, PerAddress: 100, Window: time.Minute})
	email, addr := random()+"@example.com", "2001:db8::"+random()[:4]
	for _, n := range []int{1, 5} {
		if err := rdb.Set(ctx, redis.EmailKey(email), n, 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, _, _ = l.Claim(ctx, email, addr)
		if ttl := rdb.PTTL(ctx, redis.EmailKey(email)).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("counter of %d without expiry: TTL %s after a claim", n, ttl)
		}
	}
}

// Every sign-up attempt of an address counts, up to its limit.
func TestSignUpLimiter(t *testing.T) {
	ctx := context.Background()
	rdb := connect(t)
	l := redis.NewSignUpLimiter(rdb, portal.SignUpLimits{PerAddress: 3, Window: time.Minute})
	addr := "2001:db8::" + random()[:4]
	for i := 1; i <= 3; i++ {
		if ok, _, err := l.Claim(ctx, addr); !ok || err != nil {
			t.Fatalf("sign-up %d: %v %v", i, ok, err)
		}
	}
	ok, wait, err := l.Claim(ctx, addr)
	if ok || err != nil || wait <= 0 || wait > time.Minute {
		t.Fatalf("sign-up 4: %v %s %v", ok, wait, err)
	}
	if ok, _, _ := l.Claim(ctx, "2001:db8::"+random()[:4]); !ok {
		t.Error("another address refused")
	}
	if ttl := rdb.PTTL(ctx, redis.SignUpAddressKey(addr)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("counter TTL %s", ttl)
	}
}

func TestRedisDown(t *testing.T) {
	rdb, err := redis.Connect("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	l := redis.NewSignInLimiter(rdb, portal.SignInLimits{PerEmail: 3, PerAddress: 5, Window: time.Minute})
	if ok, _, err := l.Claim(context.Background(), "a@example.com", "127.0.0.1"); ok || err == nil {
		t.Errorf("with Redis down: %v %v; want refused with an error", ok, err)
	}
	if ok, _, err := redis.NewSignUpLimiter(rdb, portal.SignUpLimits{PerAddress: 3, Window: time.Minute}).Claim(context.Background(), "127.0.0.1"); ok || err == nil {
		t.Errorf("sign-ups with Redis down: %v %v; want refused with an error", ok, err)
	}
}
