package redis_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	"github.com/esimplatform/esim/services/gateway"
	"github.com/esimplatform/esim/services/gateway/redis"
	"github.com/esimplatform/esim/services/gateway/redis/redistest"
)

// connect opens a client on the Redis at url (the test Redis:
// redistest.URL()), closed when the test ends.
func connect(t *testing.T, url string) *goredis.Client {
	t.Helper()
	client, err := redis.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func uniqueKey() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

func TestRateLimiterSharesOneAllowancePerKey(t *testing.T) {
	client := connect(t, redistest.URL())
	// Two limiters on one Redis behave like two gateway replicas.
	a, b := redis.NewRateLimiter(client, nil), redis.NewRateLimiter(client, nil)
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

func TestRateLimiterAdmitsExactlyTheLimitUnderConcurrentLoad(t *testing.T) {
	client := connect(t, redistest.URL())
	// Two replicas, each coalescing its own concurrent checks.
	replicas := []*redis.RateLimiter{redis.NewRateLimiter(client, nil), redis.NewRateLimiter(client, nil)}
	key := uniqueKey()
	const limit, requests = 40, 200
	decisions := make([]gateway.RateDecision, requests)
	errs := make([]error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			decisions[i], errs[i] = replicas[i%2].Allow(context.Background(), key, limit)
		})
	}
	wg.Wait()
	// Every allowed request reports a different remaining count, as if the
	// requests had come one at a time: 39, 38, ... 0.
	remaining := map[int]bool{}
	for i, d := range decisions {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if d.Limit != limit {
			t.Fatalf("request %d: limit %d", i, d.Limit)
		}
		if !d.Allowed {
			if d.Remaining != 0 {
				t.Errorf("refused request %d reports %d remaining", i, d.Remaining)
			}
			continue
		}
		if remaining[d.Remaining] {
			t.Errorf("two allowed requests report %d remaining", d.Remaining)
		}
		remaining[d.Remaining] = true
	}
	if len(remaining) != limit {
		t.Fatalf("%d of %d concurrent requests allowed; want exactly the limit, %d", len(remaining), requests, limit)
	}
	for r := range limit {
		if !remaining[r] {
			t.Errorf("no allowed request reports %d remaining", r)
		}
	}
}

func TestRateLimiterBatchAnswersEachKeyInArrivalOrder(t *testing.T) {
	client := connect(t, redistest.URL())
	l := redis.NewRateLimiter(client, nil)
	a, b := uniqueKey(), uniqueKey()
	// a's limit is 3: its first three checks get it, in order, the fourth
	// is refused; b's checks draw on b's allowance alone.
	checks := []redis.Check{
		redis.NewCheck(a, 3), redis.NewCheck(b, 5), redis.NewCheck(a, 3),
		redis.NewCheck(a, 3), redis.NewCheck(b, 5), redis.NewCheck(a, 3),
	}
	want := []gateway.RateDecision{
		{Allowed: true, Limit: 3, Remaining: 2},
		{Allowed: true, Limit: 5, Remaining: 4},
		{Allowed: true, Limit: 3, Remaining: 1},
		{Allowed: true, Limit: 3, Remaining: 0},
		{Allowed: true, Limit: 5, Remaining: 3},
		{Allowed: false, Limit: 3, Remaining: 0},
	}
	got, errs, err := l.AllowBatch(context.Background(), checks)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if errs[i] != nil {
			t.Fatalf("check %d: %v", i, errs[i])
		}
		if got[i].ResetAfter <= 0 || got[i].ResetAfter > time.Minute {
			t.Errorf("check %d: reset after %s", i, got[i].ResetAfter)
		}
		got[i].ResetAfter = 0
		if got[i] != want[i] {
			t.Errorf("check %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// The batch spent a's allowance: a single check after it is refused.
	if d, err := l.Allow(context.Background(), a, 3); err != nil || d.Allowed {
		t.Fatalf("check after the batch: %+v, %v; want refused", d, err)
	}
}

func TestAuthCacheStoresPrincipalsAndRejectionsWithTTL(t *testing.T) {
	client := connect(t, redistest.URL())
	c := redis.NewAuthCache(client, cacheSecret, quiet)
	ctx := context.Background()

	good, bad := uniqueKey(), uniqueKey()
	want := gateway.Principal{AccountID: "acc", Environment: gateway.Live, KeyID: "key", Currency: "EUR", RateLimitPerMinute: 7}
	if err := c.Put(ctx, good, &want, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, bad, nil, time.Now().Add(time.Minute)); err != nil {
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

// Whoever can write to Redis must not be able to make up a principal: an
// entry counts only if this gateway's secret sealed it for its own slot.
func TestAuthCacheTrustsOnlyEntriesItSealed(t *testing.T) {
	client := connect(t, redistest.URL())
	var logs telemetrytest.LogBuffer
	c := redis.NewAuthCache(client, cacheSecret, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx := context.Background()
	victim := gateway.Principal{AccountID: "victim", Environment: gateway.Live, KeyID: "key", Currency: "USD", RateLimitPerMinute: 1200}
	plain, err := json.Marshal(victim)
	if err != nil {
		t.Fatal(err)
	}

	// A genuine entry of another key, to copy from.
	other := uniqueKey()
	if err := c.Put(ctx, other, &victim, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	genuine, err := client.Get(ctx, "gw:auth:"+other).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(genuine, "v1.") {
		t.Fatalf("entry %q is not sealed", genuine)
	}
	otherSecret := redis.NewAuthCache(client, []byte("another-secret-another-secret-another"), quiet)
	forgedKey := uniqueKey()
	if err := otherSecret.Put(ctx, forgedKey, &victim, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		key, value string
	}{
		"unsealed principal":         {uniqueKey(), string(plain)},
		"unsealed rejection":         {uniqueKey(), "-"},
		"entry moved from its slot":  {uniqueKey(), genuine},
		"made-up seal":               {uniqueKey(), "v1.AAAA." + string(plain)},
		"payload changed under seal": {uniqueKey(), strings.Replace(genuine, "victim", "victin", 1)},
		"sealed with another secret": {forgedKey, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.value != "" {
				if err := client.Set(ctx, "gw:auth:"+tc.key, tc.value, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			got, ok, err := c.Get(ctx, tc.key)
			if ok || err != nil {
				t.Fatalf("Get = %+v, ok %v, err %v; want a miss, so the key is checked with accounts", got, ok, err)
			}
		})
	}
	if !strings.Contains(logs.String(), "AUTH_CACHE_SECRET") {
		t.Errorf("an entry it did not seal should be logged; logs:\n%s", logs.String())
	}
	if got, ok, err := c.Get(ctx, other); !ok || err != nil || got != victim {
		t.Fatalf("the genuine entry: %+v, %v, %v", got, ok, err)
	}
}

// Redis's TTL is not sealed: a genuine entry kept alive past its deadline
// (PERSIST, or written again) would keep a key revoked since working. The
// deadline is sealed inside the entry, and an entry past it is a miss.
func TestAuthCacheEntriesKeptPastTheirDeadlineAreMisses(t *testing.T) {
	client := connect(t, redistest.URL())
	c := redis.NewAuthCache(client, cacheSecret, quiet)
	ctx := context.Background()
	key := uniqueKey()
	want := gateway.Principal{AccountID: "acc", Environment: gateway.Live, KeyID: "key", Currency: "USD"}
	if err := c.Put(ctx, key, &want, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := client.Persist(ctx, "gw:auth:"+key).Err(); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := c.Get(ctx, key); !ok || err != nil || got != want {
		t.Fatalf("before its deadline: %+v, %v, %v", got, ok, err)
	}
	time.Sleep(400 * time.Millisecond)
	if n, err := client.Exists(ctx, "gw:auth:"+key).Result(); err != nil || n != 1 {
		t.Fatalf("the persisted entry is gone (%d, %v): the test proves nothing", n, err)
	}
	if got, ok, err := c.Get(ctx, key); ok || err != nil {
		t.Fatalf("past its deadline: %+v, ok %v, err %v; want a miss", got, ok, err)
	}
}

func TestConnectDialsOnceAndRetriesWithoutBackoff(t *testing.T) {
	client := connect(t, redistest.URL())
	// As go-redis normalises them: -1 backoff becomes 0, which it skips.
	o := client.Options()
	if o.DialerRetries != 1 || o.MaxRetries != 1 || o.MinRetryBackoff != 0 || o.MaxRetryBackoff != 0 {
		t.Fatalf("dial attempts %d, retries %d, backoff %s to %s; want 1, 1, none",
			o.DialerRetries, o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff)
	}
}

func TestMalformedURLErrorKeepsThePasswordOut(t *testing.T) {
	for _, u := range []string{"redis://:s3cr3t@host:abc/0", "redis://user:s3cr3t@host/x", "redis://:s3cr3t@host/0?dial_timeout=soon"} {
		_, err := redis.Connect(u)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Connect(%q): %v; want an error without the password", u, err)
		}
	}
}

func TestUnreachableRedisIsAnErrorNotAHang(t *testing.T) {
	client, err := redis.Connect("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := redis.NewRateLimiter(client, nil).Allow(context.Background(), "k", 5); err == nil {
		t.Fatal("want an error from an unreachable redis")
	}
	if _, _, err := redis.NewAuthCache(client, cacheSecret, quiet).Get(context.Background(), "k"); err == nil {
		t.Fatal("want an error from an unreachable redis")
	}
}

// TestRedisClientLogsAreJSON: go-redis's own complaints (here, a pool that
// cannot dial) land in the service's structured log, not as plain text on
// stderr.
func TestRedisClientLogsAreJSON(t *testing.T) {
	var buf bytes.Buffer
	previous := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(previous) })

	client, err := redis.Connect("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Ping(context.Background()).Err(); err == nil {
		t.Fatal("want an error from an unreachable redis")
	}
	var line struct {
		Level, Msg, Detail string
	}
	if err := json.Unmarshal(bytes.SplitN(buf.Bytes(), []byte("\n"), 2)[0], &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if line.Level != "WARN" || line.Msg != "redis client" || !strings.Contains(line.Detail, "failed to dial") {
		t.Fatalf("log line %+v, want a warning naming the failed dial", line)
	}
}

// Each allowed check of a batch reports when the allowance is back in full
// after its own request, as separate calls would: with 60 a minute, one
// second per request taken, not the reset after the whole batch.
func TestRateLimiterBatchReportsEachChecksOwnReset(t *testing.T) {
	l := redis.NewRateLimiter(connect(t, redistest.URL()), nil)
	key := uniqueKey()
	checks := make([]redis.Check, 5)
	for i := range checks {
		checks[i] = redis.NewCheck(key, 60)
	}
	got, errs, err := l.AllowBatch(context.Background(), checks)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		want := time.Duration(i+1) * time.Second
		if !d.Allowed || d.Remaining != 59-i || d.ResetAfter > want || d.ResetAfter < want-100*time.Millisecond {
			t.Errorf("check %d: %+v, want allowed, %d remaining, reset after about %s", i, d, 59-i, want)
		}
	}

	// A batch larger than what is left: the refused checks report the
	// reset after the last allowed one.
	key = uniqueKey()
	checks = make([]redis.Check, 5)
	for i := range checks {
		checks[i] = redis.NewCheck(key, 3)
	}
	got, _, _ = l.AllowBatch(context.Background(), checks)
	for i, d := range got {
		want := time.Duration(min(i, 2)+1) * 20 * time.Second
		if d.Allowed != (i < 3) || d.ResetAfter > want || d.ResetAfter < want-time.Second {
			t.Errorf("check %d: %+v, want allowed=%v and reset after about %s", i, d, i < 3, want)
		}
	}
}
