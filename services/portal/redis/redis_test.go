package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/portal"
	"github.com/esimplatform/esim/services/portal/portaltest"
	"github.com/esimplatform/esim/services/portal/redis"
)

func random() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The limits hold per email and per address, in fixed windows in Redis
// that end on their own.
func TestSignInLimiter(t *testing.T) {
	ctx := context.Background()
	rdb, err := redis.Connect(portaltest.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	l := redis.NewSignInLimiter(rdb, portal.SignInLimits{PerEmail: 3, PerAddress: 5, Window: 2 * time.Second})

	email, addr := random()+"@example.com", "2001:db8::"+random()[:4]
	allowed := func(email string) bool {
		t.Helper()
		ok, _, err := l.Check(ctx, email, addr)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	fail := func(email string) {
		t.Helper()
		if err := l.Failed(ctx, email, addr); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		if !allowed(email) {
			t.Fatalf("attempt %d refused after %d failures", i, i-1)
		}
		fail(email)
	}
	ok, wait, err := l.Check(ctx, email, addr)
	if ok || err != nil || wait <= 0 || wait > 2*time.Second {
		t.Fatalf("after 3 failures for one email: %v %s %v", ok, wait, err)
	}
	// The address has failed 3 times; another email may fail twice more
	// from it, then no email may try.
	other := random() + "@example.com"
	fail(other)
	if !allowed(other) {
		t.Error("the address refused after 4 failures")
	}
	fail(other)
	if allowed(random() + "@example.com") {
		t.Error("the address allowed after 5 failures")
	}
	// Counters are keyed by the email's hash, never the email itself.
	if n, _ := rdb.Exists(ctx, redis.EmailKey(email)).Result(); n != 1 {
		t.Errorf("no counter at %s", redis.EmailKey(email))
	}
	if ttl := rdb.PTTL(ctx, redis.EmailKey(email)).Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Errorf("counter TTL %s", ttl)
	}
	time.Sleep(2100 * time.Millisecond)
	if !allowed(email) {
		t.Error("refused after the window")
	}
}

// Signing in does not count: only failures do.
func TestSuccessesDoNotCount(t *testing.T) {
	rdb, err := redis.Connect(portaltest.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	l := redis.NewSignInLimiter(rdb, portal.SignInLimits{PerEmail: 1, PerAddress: 1, Window: time.Minute})
	email, addr := random()+"@example.com", "2001:db8::"+random()[:4]
	for range 5 {
		if ok, _, err := l.Check(context.Background(), email, addr); !ok || err != nil {
			t.Fatalf("check without failures: %v %v", ok, err)
		}
	}
}

func TestRedisDown(t *testing.T) {
	rdb, err := redis.Connect("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	l := redis.NewSignInLimiter(rdb, portal.SignInLimits{PerEmail: 3, PerAddress: 5, Window: time.Minute})
	if ok, _, err := l.Check(context.Background(), "a@example.com", "127.0.0.1"); ok || err == nil {
		t.Errorf("with Redis down: %v %v; want refused with an error", ok, err)
	}
}
