package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/redis"
	"github.com/esimplatform/esim/services/gateway/redis/redistest"
)

func uniqueKey() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

func TestRateLimiterSharesOneAllowancePerKey(t *testing.T) {
	client, err := redis.Connect(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// Two limiters on one Redis behave like two gateway replicas.
	a, b := redis.NewRateLimiter(client), redis.NewRateLimiter(client)
	key := uniqueKey()
	ctx := context.Background()
	for i, l := range []*redis.RateLimiter{a, b, a} {
		d, err := l.Allow(ctx, key, 3)
		if err != nil {
			t.Fatalf("redis at %s: %v", redistest.URL(), err)
		}
		if !d.Allowed || d.Remaining != 2-i || d.Limit != 3 {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	d, err := b.Allow(ctx, key, 3)
	if err != nil || d.Allowed {
		t.Fatalf("4th request across replicas: %+v, %v; want refused", d, err)
	}
	if d.ResetAfter <= 0 || d.ResetAfter > time.Minute {
		t.Fatalf("reset after %s", d.ResetAfter)
	}
}

func TestAuthCacheStoresPrincipalsAndRejectionsWithTTL(t *testing.T) {
	client, err := redis.Connect(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c := redis.NewAuthCache(client)
	ctx := context.Background()

	good, bad := uniqueKey(), uniqueKey()
	want := gateway.Principal{AccountID: "acc", Environment: gateway.Live, KeyID: "key", Currency: "EUR", RateLimitPerMinute: 7}
	if err := c.Put(ctx, good, &want, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, bad, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := c.Get(ctx, good); err != nil || !ok || got != want {
		t.Fatalf("get good: %+v %v %v", got, ok, err)
	}
	if _, _, err := c.Get(ctx, bad); !errors.Is(err, gateway.ErrUnauthorized) {
		t.Fatalf("get rejected: err = %v", err)
	}
	if _, ok, err := c.Get(ctx, uniqueKey()); ok || err != nil {
		t.Fatalf("miss: ok=%v err=%v", ok, err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, ok, _ := c.Get(ctx, good); ok {
		t.Fatal("entry outlived its TTL")
	}
}

func TestConnectDialsOnceAndRetriesWithoutBackoff(t *testing.T) {
	client, err := redis.Connect(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// As go-redis normalises them: -1 backoff becomes 0, which it skips.
	o := client.Options()
	if o.DialerRetries != 1 || o.MaxRetries != 1 || o.MinRetryBackoff != 0 || o.MaxRetryBackoff != 0 {
		t.Fatalf("dial attempts %d, retries %d, backoff %s to %s; want 1, 1, none",
			o.DialerRetries, o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff)
	}
}

func TestUnreachableRedisIsAnErrorNotAHang(t *testing.T) {
	client, err := redis.Connect("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := redis.NewRateLimiter(client).Allow(context.Background(), "k", 5); err == nil {
		t.Fatal("want an error from an unreachable redis")
	}
	if _, _, err := redis.NewAuthCache(client).Get(context.Background(), "k"); err == nil {
		t.Fatal("want an error from an unreachable redis")
	}
}
