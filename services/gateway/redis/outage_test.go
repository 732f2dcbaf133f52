package redis_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/redis"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// cacheSecret seals the tests' auth cache entries.
var cacheSecret = []byte("test-auth-cache-secret-of-32-bytes!")

// hungRedis is a server that accepts connections and never answers, as a
// Redis does that is paused, swapping or wedged. It counts connections.
func hungRedis(t *testing.T) (url string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int32{}
	var mu sync.Mutex
	var conns []net.Conn
	accepting := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-accepting
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	return "redis://" + ln.Addr().String() + "/0", accepted
}

// privateRedis starts a redis-server of the test's own, which the test may
// pause and resume, and stops it when the test ends.
func privateRedis(t *testing.T) (url string, proc *exec.Cmd) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: this test pauses a Redis of its own (.ci/run installs redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	proc = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proc.Process.Signal(syscall.SIGCONT)
		_ = proc.Process.Kill()
		_ = proc.Wait()
	})
	url = "redis://127.0.0.1:" + port + "/0"
	probe := connect(t, url)
	for start := time.Now(); probe.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("private redis-server did not start")
		}
	}
	return url, proc
}

// slowest runs n calls at once and returns the longest one took.
func slowest(n int, call func(i int)) time.Duration {
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			call(i)
			mu.Lock()
			worst = max(worst, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	return worst
}

// A hung Redis costs a rate-limit check one command timeout, however many
// checks are queued ahead of it, each batch hanging for a read timeout.
func TestHungRedisFailsEveryRateCheckWithinOneTimeout(t *testing.T) {
	url, _ := hungRedis(t)
	client := connect(t, url)
	l := redis.NewRateLimiter(client, nil)
	var failed atomic.Int32
	worst := slowest(4000, func(int) {
		if _, err := l.Allow(context.Background(), "k", 5); err != nil {
			failed.Add(1)
		}
	})
	if failed.Load() != 4000 {
		t.Fatalf("%d of 4000 checks failed against a hung Redis, want all", failed.Load())
	}
	if worst > 3*redis.CommandTimeout {
		t.Fatalf("slowest check took %s against a hung Redis; want about one command timeout (%s)", worst, redis.CommandTimeout)
	}
}

// Lookups of distinct keys share the client's pool; against a hung Redis
// each fails within one timeout, its wait for a pooled connection included.
func TestHungRedisFailsEveryAuthLookupWithinOneTimeout(t *testing.T) {
	url, _ := hungRedis(t)
	client := connect(t, url)
	c := redis.NewAuthCache(client, cacheSecret, quiet)
	worst := slowest(200, func(i int) {
		if _, _, err := c.Get(context.Background(), strconv.Itoa(i)); err == nil {
			t.Error("Get from a hung Redis succeeded")
		}
	})
	if worst > 3*redis.CommandTimeout {
		t.Fatalf("slowest lookup took %s against a hung Redis; want about one command timeout (%s)", worst, redis.CommandTimeout)
	}
}

// The gateway's limiter over a hung Redis: every request is answered (by
// the per-replica fallback), none waits much longer than one timeout, and
// during the cool-down no request goes near Redis.
func TestFailoverLimiterOverAHungRedis(t *testing.T) {
	url, accepted := hungRedis(t)
	client := connect(t, url)
	f := &gateway.FailoverLimiter{Shared: redis.NewRateLimiter(client, nil), Local: &gateway.LocalLimiter{}, Log: quiet, Cooldown: time.Hour}
	var allowed atomic.Int32
	worst := slowest(2000, func(int) {
		d, err := f.Allow(context.Background(), "k", 1000)
		if err != nil {
			t.Error(err)
		}
		if d.Allowed {
			allowed.Add(1)
		}
	})
	if worst > 3*redis.CommandTimeout {
		t.Fatalf("slowest request took %s against a hung Redis; want about one command timeout (%s)", worst, redis.CommandTimeout)
	}
	// The local bucket refills about 17 a second meanwhile.
	if n := allowed.Load(); n < 1000 || n > 1020 {
		t.Fatalf("%d of 2000 requests allowed with a limit of 1000 per replica", n)
	}
	// Dials made during the burst may still sit in the listener's backlog,
	// or finish after their caller gave up: count them all before the
	// cool-down is judged.
	dialled := settled(t, accepted)
	for range 100 {
		if _, err := f.Allow(context.Background(), "k", 1000); err != nil {
			t.Fatal(err)
		}
	}
	if n := accepted.Load() - dialled; n != 0 {
		t.Fatalf("%d connections to Redis during the cool-down, want none", n)
	}
}

// settled returns n once it has stopped changing for longer than a dial
// may take (DialTimeout is one command timeout).
func settled(t *testing.T, n *atomic.Int32) int32 {
	t.Helper()
	last, since := n.Load(), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if v := n.Load(); v != last {
			last, since = v, time.Now()
		} else if time.Since(since) > 2*redis.CommandTimeout {
			return last
		}
	}
	t.Fatalf("connections to Redis still being made 10 s after the burst (%d so far)", last)
	return 0
}

// revocable accepts one key until it is revoked, and runs beforeAnswer in
// its first call, before answering.
type revocable struct {
	revoked      atomic.Bool
	beforeAnswer func()
	once         sync.Once
}

func (a *revocable) Authenticate(context.Context, string) (gateway.Principal, error) {
	a.once.Do(a.beforeAnswer)
	if a.revoked.Load() {
		return gateway.Principal{}, gateway.ErrUnauthorized
	}
	return gateway.Principal{AccountID: "acc", Environment: gateway.Live, KeyID: "key"}, nil
}

// A write that Redis applies late must not cache a revoked key afresh.
// Here Redis stalls (SIGSTOP) after answering the lookup's Get and before
// the Put: the client gives up on the Put, the key is revoked, and when
// Redis resumes it applies the Put. With a plain SET ... PX the stale
// answer then lived a whole TTL from the resumption, and the revoked key
// kept working well past 1.5 x TTL.
func TestRevokedKeyStopsWhenRedisAppliesAStalledWriteLate(t *testing.T) {
	url, proc := privateRedis(t)
	client := connect(t, url)
	const ttl = time.Second
	const secret = "sk_live_0123456789abcdef0123456789abcdef"
	accts := &revocable{beforeAnswer: func() { _ = proc.Process.Signal(syscall.SIGSTOP) }}
	c := &gateway.CachedAccounts{Accounts: accts, Cache: redis.NewAuthCache(client, cacheSecret, quiet), TTL: ttl, LocalTTL: ttl / 2, Log: quiet}
	ctx := context.Background()
	// A gateway that has written before has the write's script loaded in
	// Redis. Without it the stalled write would be an EVALSHA failing with
	// NOSCRIPT, and the deadline in the script would go untested.
	if err := redis.NewAuthCache(client, cacheSecret, quiet).Put(ctx, "warm", &gateway.Principal{}, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}

	if _, err := c.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	accts.revoked.Store(true)
	revokedAt := time.Now()

	// Redis resumes after the revocation should have landed, and applies
	// the stalled Put.
	time.Sleep(ttl*3/2 + 100*time.Millisecond)
	if err := proc.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); client.Ping(ctx).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("redis did not come back")
		}
	}
	sum := sha256.Sum256([]byte(secret))
	if n, err := client.Exists(ctx, "gw:auth:"+hex.EncodeToString(sum[:])).Result(); err != nil || n != 0 {
		t.Errorf("the stalled write was applied after its deadline (exists %d, %v)", n, err)
	}
	// The cache's cool-down after the failed Put has passed by now.
	if _, err := c.Authenticate(ctx, secret); !errors.Is(err, gateway.ErrUnauthorized) {
		t.Fatalf("revoked key %s after revocation (1.5 x TTL is %s): %v, want ErrUnauthorized", time.Since(revokedAt).Round(time.Millisecond), ttl*3/2, err)
	}
}

// An answer is cached until its deadline and no longer; one past it is not
// written at all. Only hashes of keys are stored.
func TestAuthCacheKeepsAnAnswerUntilItsDeadline(t *testing.T) {
	url, _ := privateRedis(t)
	client := connect(t, url)
	c := redis.NewAuthCache(client, cacheSecret, quiet)
	ctx := context.Background()
	p := gateway.Principal{AccountID: "acc", KeyID: "key"}

	if err := c.Put(ctx, "past", &p, time.Now().Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, "past"); ok || err != nil {
		t.Fatalf("answer past its deadline: ok=%v err=%v, want a miss", ok, err)
	}
	if err := c.Put(ctx, "soon", &p, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if ttl := client.PTTL(ctx, "gw:auth:soon").Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("PTTL %s, want at most 300ms", ttl)
	}

	// Through CachedAccounts: the key in Redis is the secret's SHA-256.
	const secret = "sk_sandbox_secretsecretsecretsecret"
	ca := &gateway.CachedAccounts{Accounts: &revocable{beforeAnswer: func() {}}, Cache: c, TTL: time.Second, LocalTTL: time.Second / 2, Log: quiet}
	if _, err := ca.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	keys, err := client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(secret))
	want := "gw:auth:" + hex.EncodeToString(sum[:])
	found := false
	for _, k := range keys {
		v, _ := client.Get(ctx, k).Result()
		if strings.Contains(k, "secret") || strings.Contains(v, "secret") {
			t.Errorf("Redis holds the secret: %q = %q", k, v)
		}
		found = found || k == want
	}
	if !found {
		t.Fatalf("keys %v, want %s", keys, want)
	}
}
