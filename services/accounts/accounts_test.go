package accounts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// memStore is an in-memory Store for the domain's own rules; the real
// Store is tested against Postgres in package postgres.
type memStore struct {
	mu       sync.Mutex
	accounts map[uuid.UUID]Account
	keys     map[uuid.UUID]APIKey
	hashes   map[uuid.UUID][]byte
	lookups  int // KeyByHash calls
	// keyPages records the (limit, offset) of every ListKeys call.
	keyPages [][2]int64
	fail     error
}

func newMemStore() *memStore {
	return &memStore{accounts: map[uuid.UUID]Account{}, keys: map[uuid.UUID]APIKey{}, hashes: map[uuid.UUID][]byte{}}
}

func (m *memStore) InsertAccount(_ context.Context, a Account) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.accounts[a.ID]; ok {
		return ErrConflict
	}
	m.accounts[a.ID] = a
	return nil
}

func (m *memStore) Account(_ context.Context, id uuid.UUID) (Account, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.accounts[id]
	if !ok {
		return Account{}, ErrNotFound
	}
	return a, nil
}

func (m *memStore) ListAccounts(context.Context, int32, int64) ([]Account, int64, error) {
	return nil, int64(len(m.accounts)), nil
}

func (m *memStore) SetRateLimit(_ context.Context, id uuid.UUID, perMinute int32) (Account, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.accounts[id]
	if !ok {
		return Account{}, ErrNotFound
	}
	a.RateLimitPerMinute = perMinute
	m.accounts[id] = a
	return a, nil
}

func (m *memStore) InsertKey(_ context.Context, k APIKey, secretHash []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.accounts[k.AccountID]; !ok {
		return ErrNotFound
	}
	m.keys[k.ID] = k
	m.hashes[k.ID] = secretHash
	return nil
}

func (m *memStore) ListKeys(_ context.Context, accountID uuid.UUID, limit int32, offset int64) ([]APIKey, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keyPages = append(m.keyPages, [2]int64{int64(limit), offset})
	var total int64
	for _, k := range m.keys {
		if k.AccountID == accountID {
			total++
		}
	}
	return nil, total, nil
}

func (m *memStore) RevokeKey(_ context.Context, accountID, keyID uuid.UUID, at time.Time) (APIKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[keyID]
	if !ok || k.AccountID != accountID {
		return APIKey{}, ErrNotFound
	}
	if k.RevokedAt == nil {
		k.RevokedAt = &at
	}
	m.keys[keyID] = k
	return k, nil
}

func (m *memStore) KeyByHash(_ context.Context, secretHash []byte) (KeyRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	if m.fail != nil {
		return KeyRecord{}, m.fail
	}
	for id, h := range m.hashes {
		if bytes.Equal(h, secretHash) {
			k := m.keys[id]
			a := m.accounts[k.AccountID]
			return KeyRecord{Key: k, SecretHash: h, Currency: a.Currency, RateLimitPerMinute: a.RateLimitPerMinute}, nil
		}
	}
	return KeyRecord{}, ErrNotFound
}

func TestSecretFormat(t *testing.T) {
	for _, env := range []Environment{Sandbox, Live} {
		secret, prefix := newSecret(env)
		s := secret.Reveal()
		wantPrefix := "sk_" + string(env) + "_"
		if !strings.HasPrefix(s, wantPrefix) {
			t.Fatalf("secret %q lacks prefix %q", s, wantPrefix)
		}
		random := strings.TrimPrefix(s, wantPrefix)
		if len(random) != 32 {
			t.Errorf("random part has %d characters, want 32", len(random))
		}
		for _, c := range random {
			if !strings.ContainsRune(secretAlphabet, c) {
				t.Errorf("random part %q contains %q, not alphanumeric", random, c)
			}
		}
		if prefix != wantPrefix+random[:6] {
			t.Errorf("display prefix = %q, want %q", prefix, wantPrefix+random[:6])
		}
		if !wellFormedSecret(s) {
			t.Errorf("a fresh secret is not well formed: %s", prefix)
		}
	}
}

func TestSecretEntropy(t *testing.T) {
	if len(secretAlphabet) != 62 {
		t.Fatalf("alphabet has %d symbols, want 62 (A-Z a-z 0-9)", len(secretAlphabet))
	}
	bits := float64(secretRandomLength) * math.Log2(float64(len(secretAlphabet)))
	if bits < 190 {
		t.Errorf("secrets carry %.1f bits, want at least 190", bits)
	}

	// Every symbol must be reachable and none overrepresented: 200,000
	// draws give each symbol ~3,226 hits; a modulo bias (bytes 248..255
	// folded onto the first 8 symbols) would add ~3% to those, and a
	// broken alphabet would leave symbols at 0. The bounds are ±10%, about
	// 5.6 standard deviations, so the test does not flake.
	const draws = 200_000
	counts := map[byte]int{}
	for _, c := range []byte(randomAlphanumeric(draws)) {
		counts[c]++
	}
	want := float64(draws) / 62
	for i := range len(secretAlphabet) {
		c := secretAlphabet[i]
		if got := float64(counts[c]); got < want*0.9 || got > want*1.1 {
			t.Errorf("symbol %q drawn %v times, want about %.0f", c, got, want)
		}
	}
	if len(counts) != 62 {
		t.Errorf("%d distinct symbols drawn, want 62", len(counts))
	}
}

func TestSecretsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	prefixes := map[string]bool{}
	for range 20_000 {
		secret, prefix := newSecret(Live)
		if seen[secret.Reveal()] {
			t.Fatal("duplicate secret generated")
		}
		seen[secret.Reveal()] = true
		prefixes[prefix] = true
	}
	// 36 bits of display prefix: collisions among 20,000 are possible but
	// rare; many would mean the random part is not random.
	if len(prefixes) < 19_990 {
		t.Errorf("only %d distinct display prefixes in 20,000 keys", len(prefixes))
	}
}

var badVerbs = "%d %x %t %w %w %p"

func TestSecretNeverPrintsItself(t *testing.T) {
	secret, _ := newSecret(Sandbox)
	issued := IssuedKey{Secret: secret}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("issued", "secret", secret, "key", issued)
	for _, out := range []string{
		fmt.Sprint(secret), fmt.Sprintf("%v %+v %#v %s %q", issued, issued, issued, secret, secret),
		logs.String(), fmt.Errorf("wrapped: %v", secret).Error(),
		// Verbs a string does not take, which fmt answers on paths that
		// skip String (a variable format, so vet lets the mistake be made).
		fmt.Sprintf(badVerbs, secret, secret, issued, secret, issued, secret), fmt.Errorf(badVerbs, secret, secret, issued, secret, issued, secret).Error(),
	} {
		if strings.Contains(out, secret.Reveal()) || strings.Contains(out, secret.Reveal()[11:]) {
			t.Errorf("secret leaked in %q", out)
		}
	}
}

func TestWellFormedSecret(t *testing.T) {
	valid := "sk_live_" + strings.Repeat("aZ09", 8)
	if !wellFormedSecret(valid) {
		t.Fatalf("%q rejected", valid)
	}
	for _, s := range []string{
		"",
		"sk_live_",
		"sk_live_" + strings.Repeat("a", 31),
		"sk_live_" + strings.Repeat("a", 33),
		"sk_test_" + strings.Repeat("a", 32),
		"pk_live_" + strings.Repeat("a", 32),
		"SK_LIVE_" + strings.Repeat("a", 32),
		"sk_live_" + strings.Repeat("a", 31) + "-",
		"sk_live_" + strings.Repeat("a", 31) + "é",
		" sk_live_" + strings.Repeat("a", 32),
		"Bearer sk_live_" + strings.Repeat("a", 32),
	} {
		if wellFormedSecret(s) {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestCreateAccountValidation(t *testing.T) {
	ctx := context.Background()
	svc := NewService(newMemStore())

	a, err := svc.CreateAccount(ctx, NewAccount{Name: "  Acme Travel  "})
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if a.Currency != USD || a.Name != "Acme Travel" || a.ID.Version() != 7 || a.CreatedAt.Location() != time.UTC {
		t.Errorf("account = %+v; want USD, trimmed name, a v7 id, a UTC time", a)
	}

	for _, tc := range []struct {
		in    NewAccount
		field string
	}{
		{NewAccount{Name: ""}, "name"},
		{NewAccount{Name: "   "}, "name"},
		{NewAccount{Name: strings.Repeat("é", 121)}, "name"},
		{NewAccount{Name: "bad\x00name"}, "name"},
		{NewAccount{Name: "bad\xffname"}, "name"},
		{NewAccount{Name: "x", Currency: "JPY"}, "currency"},
		{NewAccount{Name: "x", Currency: "usd"}, "currency"},
		{NewAccount{Name: "x", RateLimitPerMinute: -1}, "rate_limit_per_minute"},
		{NewAccount{Name: "x", RateLimitPerMinute: MaxRateLimitPerMinute + 1}, "rate_limit_per_minute"},
		{NewAccount{Name: "x", RateLimitPerMinute: math.MaxInt32}, "rate_limit_per_minute"},
		// Names that show nothing, or not what they are.
		{NewAccount{Name: "\u202e\u200b"}, "name"},
		{NewAccount{Name: "\u200b\u200b"}, "name"},
		{NewAccount{Name: " \u2060\ufeff "}, "name"},
		{NewAccount{Name: "--"}, "name"},
		{NewAccount{Name: "Acme\u202eofni.exe"}, "name"},
		{NewAccount{Name: "Acme \u2066Travel\u2069"}, "name"},
		{NewAccount{Name: "\u202aAcme\u202c"}, "name"},
	} {
		before := len(svc.store.(*memStore).accounts)
		_, err := svc.CreateAccount(ctx, tc.in)
		if after := len(svc.store.(*memStore).accounts); after != before {
			t.Errorf("CreateAccount(%+q) stored an account", tc.in.Name)
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("CreateAccount(%+v): err = %v, want a ValidationError on %s", tc.in, err, tc.field)
		}
	}

	// An invisible offender is named, as the catalogue names it.
	for name, want := range map[string]string{
		"Acme\u202eofni.exe": "must not contain bidirectional override or isolate characters (found U+202E)",
		"Acme\x1b[31m":       "must not contain control characters (found U+001B)",
		"Acme\u2028Travel":   "must not contain line or paragraph separators (found U+2028)",
	} {
		var ve *ValidationError
		if _, err := svc.CreateAccount(ctx, NewAccount{Name: name}); !errors.As(err, &ve) || ve.Reason != want {
			t.Errorf("CreateAccount(%+q): %v, want the reason %q", name, err, want)
		}
	}

	if _, err := svc.CreateAccount(ctx, NewAccount{Name: strings.Repeat("é", 120), Currency: GBP, RateLimitPerMinute: 0}); err != nil {
		t.Errorf("120 characters (240 bytes) rejected: %v", err)
	}
	for _, name := range []string{"7", "東京トラベル", "Ünïcödé Reisen", "Acme\u200dTravel", "متحدة للسفر"} {
		if _, err := svc.CreateAccount(ctx, NewAccount{Name: name, RateLimitPerMinute: MaxRateLimitPerMinute}); err != nil {
			t.Errorf("CreateAccount(%+q, the maximum rate limit) rejected: %v", name, err)
		}
	}

	chosen := uuid.New()
	if a, err := svc.CreateAccount(ctx, NewAccount{ID: chosen, Name: "Import"}); err != nil || a.ID != chosen {
		t.Fatalf("CreateAccount with a chosen id = %v, %v", a.ID, err)
	}
	if _, err := svc.CreateAccount(ctx, NewAccount{ID: chosen, Name: "Again"}); !errors.Is(err, ErrConflict) {
		t.Errorf("taken id: err = %v, want ErrConflict", err)
	}
}

func TestSetRateLimitBounds(t *testing.T) {
	ctx := context.Background()
	svc := NewService(newMemStore())
	a, err := svc.CreateAccount(ctx, NewAccount{Name: "Acme", RateLimitPerMinute: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, perMinute := range []int32{-1, MaxRateLimitPerMinute + 1, math.MaxInt32} {
		_, err := svc.SetRateLimit(ctx, a.ID, perMinute)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "rate_limit_per_minute" {
			t.Errorf("SetRateLimit(%d): err = %v, want a ValidationError on rate_limit_per_minute", perMinute, err)
		}
		if got, _ := svc.GetAccount(ctx, a.ID); got.RateLimitPerMinute != 600 {
			t.Errorf("SetRateLimit(%d) changed the stored limit to %d", perMinute, got.RateLimitPerMinute)
		}
	}
	if got, err := svc.SetRateLimit(ctx, a.ID, MaxRateLimitPerMinute); err != nil || got.RateLimitPerMinute != MaxRateLimitPerMinute {
		t.Errorf("SetRateLimit(the maximum) = %v, %v", got.RateLimitPerMinute, err)
	}
}

// outOfRangePages are page and limit pairs every list refuses, with the
// field it names.
var outOfRangePages = []struct {
	page, limit int32
	field       string
}{
	{-1, 20, "page"},
	{MaxPage + 1, 20, "page"},
	{math.MaxInt32, 100, "page"},
	{math.MinInt32, 0, "page"},
	{1, -1, "limit"},
	{1, MaxPageLimit + 1, "limit"},
	{0, math.MaxInt32, "limit"},
}

func TestListAccountsPaging(t *testing.T) {
	svc := NewService(newMemStore())
	for _, tc := range outOfRangePages {
		_, err := svc.ListAccounts(context.Background(), tc.page, tc.limit)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("ListAccounts(%d, %d): err = %v, want a ValidationError on %s", tc.page, tc.limit, err, tc.field)
		}
	}
	if _, err := svc.ListAccounts(context.Background(), 0, 0); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
	if _, err := svc.ListAccounts(context.Background(), MaxPage, MaxPageLimit); err != nil {
		t.Errorf("the last page rejected: %v", err)
	}
}

// ListKeys checks page and limit as ListAccounts does, before reading
// anything, and defaults to a page large enough for an account's keys.
func TestListKeysPaging(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := NewService(store)
	a, err := svc.CreateAccount(ctx, NewAccount{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range outOfRangePages {
		_, err := svc.ListKeys(ctx, a.ID, tc.page, tc.limit)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("ListKeys(%d, %d): err = %v, want a ValidationError on %s", tc.page, tc.limit, err, tc.field)
		}
	}
	if len(store.keyPages) != 0 {
		t.Errorf("rejected pages reached the store: %v", store.keyPages)
	}
	for _, tc := range []struct {
		page, limit           int32
		wantLimit, wantOffset int64
	}{
		{0, 0, DefaultKeyPageLimit, 0},
		{1, 0, DefaultKeyPageLimit, 0},
		{3, 7, 7, 14},
		{MaxPage, MaxPageLimit, MaxPageLimit, (MaxPage - 1) * MaxPageLimit},
	} {
		store.keyPages = nil
		if _, err := svc.ListKeys(ctx, a.ID, tc.page, tc.limit); err != nil {
			t.Errorf("ListKeys(%d, %d): %v", tc.page, tc.limit, err)
			continue
		}
		if want := [][2]int64{{tc.wantLimit, tc.wantOffset}}; fmt.Sprint(store.keyPages) != fmt.Sprint(want) {
			t.Errorf("ListKeys(%d, %d) read %v, want limit and offset %v", tc.page, tc.limit, store.keyPages, want)
		}
	}
	if DefaultKeyPageLimit < DefaultPageLimit || DefaultKeyPageLimit > MaxPageLimit {
		t.Errorf("DefaultKeyPageLimit = %d, want between %d and %d", DefaultKeyPageLimit, DefaultPageLimit, MaxPageLimit)
	}
	store.keyPages = nil
	if _, err := svc.ListKeys(ctx, uuid.New(), 0, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListKeys(unknown account): err = %v, want ErrNotFound", err)
	}
	if len(store.keyPages) != 0 {
		t.Errorf("an unknown account's keys were read: %v", store.keyPages)
	}
}

func TestCreateKeyValidation(t *testing.T) {
	ctx := context.Background()
	svc := NewService(newMemStore())
	a, _ := svc.CreateAccount(ctx, NewAccount{Name: "Acme"})

	for _, tc := range []struct {
		in    NewKey
		field string
	}{
		{NewKey{AccountID: a.ID, Environment: ""}, "environment"},
		{NewKey{AccountID: a.ID, Environment: "staging"}, "environment"},
		{NewKey{AccountID: a.ID, Environment: Live, Name: strings.Repeat("n", 121)}, "name"},
		{NewKey{AccountID: a.ID, Environment: Live, Name: "\u202e\u200b"}, "name"},
		{NewKey{AccountID: a.ID, Environment: Live, Name: "prod\u202e"}, "name"},
	} {
		_, err := svc.CreateKey(ctx, tc.in)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("CreateKey(%+v): err = %v, want a ValidationError on %s", tc.in, err, tc.field)
		}
	}
	if _, err := svc.CreateKey(ctx, NewKey{AccountID: uuid.New(), Environment: Live}); !errors.Is(err, ErrNotFound) {
		t.Errorf("CreateKey for an unknown account: err = %v, want ErrNotFound", err)
	}
}

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := NewService(store)
	a, _ := svc.CreateAccount(ctx, NewAccount{Name: "Acme", Currency: GBP, RateLimitPerMinute: 300})
	issued, err := svc.CreateKey(ctx, NewKey{AccountID: a.ID, Environment: Sandbox, Name: "ci"})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	if bytes.Contains(store.hashes[issued.Key.ID], []byte(issued.Secret.Reveal())) {
		t.Fatal("the store was handed the plaintext")
	}

	p, err := svc.Authenticate(ctx, issued.Secret.Reveal())
	want := Principal{AccountID: a.ID, Environment: Sandbox, KeyID: issued.Key.ID, Currency: GBP, RateLimitPerMinute: 300}
	if err != nil || p != want {
		t.Fatalf("Authenticate = %+v, %v; want %+v", p, err, want)
	}

	// A live-looking secret that hashes to nothing stored is unknown; the
	// prefix grants nothing.
	if _, err := svc.Authenticate(ctx, "sk_live_"+strings.TrimPrefix(issued.Secret.Reveal(), "sk_sandbox_")); err != ErrUnauthenticated {
		t.Errorf("prefix swapped: err = %v, want ErrUnauthenticated", err)
	}

	before := store.lookups
	for _, garbage := range []string{"", "Bearer x", "sk_live_short", strings.Repeat("A", 10_000)} {
		if _, err := svc.Authenticate(ctx, garbage); err != ErrUnauthenticated {
			t.Errorf("Authenticate(%.20q): err = %v, want exactly ErrUnauthenticated", garbage, err)
		}
	}
	if store.lookups != before {
		t.Errorf("malformed secrets caused %d store lookups, want 0", store.lookups-before)
	}

	if _, err := svc.RevokeKey(ctx, a.ID, issued.Key.ID); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	if _, err := svc.Authenticate(ctx, issued.Secret.Reveal()); err != ErrUnauthenticated {
		t.Errorf("revoked key: err = %v, want exactly ErrUnauthenticated", err)
	}

	// An outage is not a bad key: callers must not cache it as one.
	store.fail = errors.New("connection refused")
	other, _ := svc.CreateKey(ctx, NewKey{AccountID: a.ID, Environment: Live})
	_, err = svc.Authenticate(ctx, other.Secret.Reveal())
	if err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Errorf("store failure: err = %v, want a non-authentication error", err)
	}
	if strings.Contains(err.Error(), other.Secret.Reveal()[8:]) {
		t.Errorf("error %q contains the secret", err)
	}
}

func TestRevokeKeyIsIdempotent(t *testing.T) {
	ctx := context.Background()
	svc := NewService(newMemStore())
	clock := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)
	svc.now = func() time.Time { return clock }
	a, _ := svc.CreateAccount(ctx, NewAccount{Name: "Acme"})
	issued, _ := svc.CreateKey(ctx, NewKey{AccountID: a.ID, Environment: Live})

	first, err := svc.RevokeKey(ctx, a.ID, issued.Key.ID)
	if err != nil || first.RevokedAt == nil || !first.RevokedAt.Equal(clock.Truncate(time.Microsecond)) {
		t.Fatalf("RevokeKey = %+v, %v", first, err)
	}
	clock = clock.Add(time.Hour)
	second, err := svc.RevokeKey(ctx, a.ID, issued.Key.ID)
	if err != nil || !second.RevokedAt.Equal(*first.RevokedAt) {
		t.Errorf("second RevokeKey = %+v, %v; want revoked_at kept at %v", second, err, first.RevokedAt)
	}

	b, _ := svc.CreateAccount(ctx, NewAccount{Name: "Other"})
	if _, err := svc.RevokeKey(ctx, b.ID, issued.Key.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke through another account: err = %v, want ErrNotFound", err)
	}
}

// The portal's methods are tested against Postgres (package twirpserver);
// memStore serves only the rules above.

var errNotInMemory = errors.New("not kept by memStore")

func (m *memStore) EnableLive(_ context.Context, id uuid.UUID) (Account, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.accounts[id]
	if !ok {
		return Account{}, ErrNotFound
	}
	a.LiveEnabled = true
	m.accounts[id] = a
	return a, nil
}

func (m *memStore) InsertSignUp(context.Context, Account, UserRecord, SessionRecord) error {
	return errNotInMemory
}
func (m *memStore) User(context.Context, uuid.UUID) (UserRecord, error) {
	return UserRecord{}, errNotInMemory
}
func (m *memStore) UserByEmail(context.Context, string) (UserRecord, error) {
	return UserRecord{}, errNotInMemory
}
func (m *memStore) InsertSession(context.Context, SessionRecord) error { return errNotInMemory }
func (m *memStore) SessionByHash(context.Context, []byte) (StoredSession, error) {
	return StoredSession{}, errNotInMemory
}
func (m *memStore) RevokeSession(context.Context, []byte, time.Time) error     { return errNotInMemory }
func (m *memStore) RevokeSessions(context.Context, uuid.UUID, time.Time) error { return errNotInMemory }
func (m *memStore) ChangePassword(context.Context, uuid.UUID, string, string, time.Time, SessionRecord) error {
	return errNotInMemory
}
func (m *memStore) InsertInvite(context.Context, InviteRecord) error { return errNotInMemory }
func (m *memStore) Invite(context.Context, []byte) (StoredInvite, error) {
	return StoredInvite{}, errNotInMemory
}
func (m *memStore) AcceptInvite(context.Context, Acceptance) (User, error) {
	return User{}, errNotInMemory
}
