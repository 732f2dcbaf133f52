// Package accounts owns partner accounts, their currency and rate limit,
// the API keys partners authenticate with, and the portal's users and
// their sessions (users.go).
//
// API key secrets are generated here, shown to the caller once and stored
// only as a SHA-256 hash. The environment a key grants (sandbox or live) is
// the key's stored record; the "sk_live_" text a caller presents never
// grants anything by itself, and a secret whose text contradicts its
// record is refused.
package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/esimplatform/esim/proto/limits"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
	"github.com/esimplatform/esim/services/accounts/argon2id"
)

// Currency is the ISO 4217 code an account is priced and billed in.
type Currency string

// The currencies the platform sells in.
const (
	USD Currency = limits.USD
	EUR Currency = limits.EUR
	GBP Currency = limits.GBP
)

// DefaultCurrency applies when an account is created without one.
const DefaultCurrency = USD

// Currencies lists them; the catalogue prices every plan in each.
var Currencies = []Currency{USD, EUR, GBP}

// Valid reports whether c is a currency the platform sells in.
func (c Currency) Valid() bool { return slices.Contains(Currencies, c) }

// Environment separates test traffic from real money: every key, balance
// and order belongs to exactly one.
type Environment string

// The two environments.
const (
	Sandbox Environment = "sandbox"
	Live    Environment = "live"
)

// Valid reports whether e is sandbox or live.
func (e Environment) Valid() bool {
	return e == Sandbox || e == Live
}

// SecretPrefix is the public start of every secret of this environment,
// "sk_sandbox_" or "sk_live_". It helps humans and secret scanners tell
// keys apart; it is never trusted for authorization.
func (e Environment) SecretPrefix() string {
	return "sk_" + string(e) + "_"
}

// Limits on what callers may store.
const (
	MaxNameLength = 120
	// Paging, as every list of the platform pages (proto/limits).
	DefaultPageLimit = limits.DefaultPageLimit
	MaxPageLimit     = limits.MaxPageLimit
	// DefaultKeyPageLimit is ListKeys' page size when the caller names
	// none: the largest page, so that an account's keys, revoked ones of
	// past rotations included, come back in one answer.
	DefaultKeyPageLimit = MaxPageLimit
	MaxPage             = limits.MaxPage
	// MaxRateLimitPerMinute bounds an account's rate limit (proto/limits).
	MaxRateLimitPerMinute = limits.MaxRateLimitPerMinute
)

// Account is a partner of the platform.
type Account struct {
	ID       uuid.UUID
	Name     string
	Currency Currency
	// RateLimitPerMinute is requests per minute for each of the account's
	// keys; 0 means the gateway's default applies.
	RateLimitPerMinute int32
	CreatedAt          time.Time
	// LiveEnabled is false for an account that signed itself up in the
	// portal until an operator vets it: live keys spend real money with
	// real providers, and sandbox ones cost nothing.
	LiveEnabled bool
}

// APIKey is what may be shown about a key: never its secret.
type APIKey struct {
	ID          uuid.UUID
	AccountID   uuid.UUID
	Environment Environment
	// Prefix is the environment prefix plus the first characters of the
	// random part ("sk_live_4fT9xQ"), enough for a partner to recognise a
	// key in a list and useless for guessing it.
	Prefix    string
	Name      string
	CreatedAt time.Time
	// RevokedAt is nil while the key is active.
	RevokedAt *time.Time
}

// Revoked reports whether the key no longer authenticates.
func (k APIKey) Revoked() bool { return k.RevokedAt != nil }

// Secret is a plaintext API key secret. It exists only between generation
// and the response to CreateKey; it prints under every fmt verb, logs and
// encodes as redacted, so that a stray %v, log attribute or debug dump
// cannot leak it. Reveal is the one way to read it. It holds a pointer,
// not a string: fmt handles a %w or %p operand (and the fields of a struct
// under one) before it looks for Format, and then prints a string's bytes
// but only a pointer's address.
type Secret struct{ value *string }

// Reveal returns the plaintext, for the single response that hands it over.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

const redacted = "[redacted]"

// The methods below implement fmt.Stringer, fmt.Formatter, slog.LogValuer
// and encoding.TextMarshaler.

func (Secret) String() string               { return redacted }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// IssuedKey is a newly created key with its secret, returned exactly once.
type IssuedKey struct {
	Key    APIKey
	Secret Secret
}

// Principal is who a valid secret speaks for: everything the gateway needs
// to serve a request without another call.
type Principal struct {
	AccountID   uuid.UUID
	Environment Environment
	KeyID       uuid.UUID
	Currency    Currency
	// RateLimitPerMinute is the account's override; 0 means the default.
	RateLimitPerMinute int32
}

// KeyRecord is a stored key as Authenticate needs it: the key, the hash of
// its secret and the owning account's settings.
type KeyRecord struct {
	Key                APIKey
	SecretHash         []byte
	Currency           Currency
	RateLimitPerMinute int32
}

// Store persists accounts and keys. Implementations return ErrNotFound and
// ErrConflict as documented and wrap every other failure.
type Store interface {
	// InsertAccount returns ErrConflict when the id is taken.
	InsertAccount(ctx context.Context, a Account) error
	// Account returns ErrNotFound for an unknown id.
	Account(ctx context.Context, id uuid.UUID) (Account, error)
	// ListAccounts returns one page, newest first, and the total count.
	ListAccounts(ctx context.Context, limit int32, offset int64) ([]Account, int64, error)
	// SetRateLimit returns the updated account or ErrNotFound.
	SetRateLimit(ctx context.Context, id uuid.UUID, perMinute int32) (Account, error)
	// InsertKey returns ErrNotFound when the account does not exist.
	InsertKey(ctx context.Context, k APIKey, secretHash []byte) error
	// ListKeys returns one page of the account's keys, newest first (ties
	// by id), revoked included, and the account's total count of keys.
	ListKeys(ctx context.Context, accountID uuid.UUID, limit int32, offset int64) ([]APIKey, int64, error)
	// RevokeKey sets revoked_at to at unless already set, and returns the
	// key; ErrNotFound unless the key belongs to the account.
	RevokeKey(ctx context.Context, accountID, keyID uuid.UUID, at time.Time) (APIKey, error)
	// KeyByHash returns ErrNotFound when no key has this secret hash.
	KeyByHash(ctx context.Context, secretHash []byte) (KeyRecord, error)
	// EnableLive sets live_enabled and returns the account, or ErrNotFound.
	EnableLive(ctx context.Context, id uuid.UUID) (Account, error)

	UserStore
	AccessStore
}

// Service holds the accounts use cases.
type Service struct {
	store      Store
	now        func() time.Time
	sessionTTL time.Duration
	inviteTTL  time.Duration
	resetTTL   time.Duration
	// hashPassword is argon2id.Hash; the domain's tests count its calls.
	hashPassword func(password string) string
}

// Option adjusts a Service.
type Option func(*Service)

// WithSessionTTL sets how long a portal session lasts; 0 keeps
// DefaultSessionTTL, so a Config built in code without it still works.
func WithSessionTTL(d time.Duration) Option {
	return func(s *Service) {
		if d > 0 {
			s.sessionTTL = d
		}
	}
}

// WithInviteTTL sets how long an invite may be accepted; 0 keeps
// DefaultInviteTTL.
func WithInviteTTL(d time.Duration) Option {
	return func(s *Service) {
		if d > 0 {
			s.inviteTTL = d
		}
	}
}

// WithResetTTL sets how long a password reset link works; 0 keeps
// DefaultResetTTL.
func WithResetTTL(d time.Duration) Option {
	return func(s *Service) {
		if d > 0 {
			s.resetTTL = d
		}
	}
}

// WithClock replaces time.Now, for tests that let sessions and invites
// expire without waiting for them.
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// NewService returns the use cases over store.
func NewService(store Store, opts ...Option) *Service {
	s := &Service{store: store, now: time.Now, sessionTTL: DefaultSessionTTL, inviteTTL: DefaultInviteTTL, resetTTL: DefaultResetTTL, hashPassword: argon2id.Hash}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NewAccount is the input of CreateAccount.
type NewAccount struct {
	// ID is optional: operators choose it for imports and seed data; the
	// zero UUID means "generate one".
	ID       uuid.UUID
	Name     string
	Currency Currency // empty means DefaultCurrency
	// RateLimitPerMinute: 0 means the gateway's default.
	RateLimitPerMinute int32
}

// CreateAccount registers a partner. A caller-chosen id that already exists
// is ErrConflict, never an overwrite.
// Operators vet the partners they create, so their accounts have live
// from the start.
func (s *Service) CreateAccount(ctx context.Context, in NewAccount) (Account, error) {
	a, err := s.newAccount(in, "name", true)
	if err != nil {
		return Account{}, err
	}
	if err := s.store.InsertAccount(ctx, a); err != nil {
		return Account{}, fmt.Errorf("create account %s: %w", a.ID, err)
	}
	return a, nil
}

// newAccount checks in and builds the account to insert; nameField is the
// name's field in the caller's request ("name", or SignUp's
// "account_name").
func (s *Service) newAccount(in NewAccount, nameField string, liveEnabled bool) (Account, error) {
	name, err := validName(nameField, in.Name, true)
	if err != nil {
		return Account{}, err
	}
	currency := in.Currency
	if currency == "" {
		currency = DefaultCurrency
	}
	if !currency.Valid() {
		return Account{}, invalid("currency", "must be one of USD, EUR, GBP")
	}
	if err := validRateLimit(in.RateLimitPerMinute); err != nil {
		return Account{}, err
	}
	id := in.ID
	if id == uuid.Nil {
		if id, err = uuid.NewV7(); err != nil {
			return Account{}, fmt.Errorf("new account id: %w", err)
		}
	}
	return Account{
		ID:                 id,
		Name:               name,
		Currency:           currency,
		RateLimitPerMinute: in.RateLimitPerMinute,
		CreatedAt:          input.Now(s.now),
		LiveEnabled:        liveEnabled,
	}, nil
}

// EnableLive lets the account create live keys. Enabling twice is a no-op.
// There is no way back: an account's live keys would go on working, so
// switching live off would only look like it did something.
func (s *Service) EnableLive(ctx context.Context, accountID uuid.UUID) (Account, error) {
	a, err := s.store.EnableLive(ctx, accountID)
	if err != nil {
		return Account{}, fmt.Errorf("enable live for account %s: %w", accountID, err)
	}
	return a, nil
}

// GetAccount returns the account or ErrNotFound.
func (s *Service) GetAccount(ctx context.Context, id uuid.UUID) (Account, error) {
	a, err := s.store.Account(ctx, id)
	if err != nil {
		return Account{}, fmt.Errorf("get account %s: %w", id, err)
	}
	return a, nil
}

// AccountPage is one page of accounts and the total across all pages.
type AccountPage struct {
	Accounts []Account
	Total    int64
}

// ListAccounts returns accounts newest first. page is 1..MaxPage; 0 means
// 1. limit is 1..MaxPageLimit; 0 means DefaultPageLimit.
func (s *Service) ListAccounts(ctx context.Context, page, limit int32) (AccountPage, error) {
	limit, offset, err := paging(page, limit, DefaultPageLimit)
	if err != nil {
		return AccountPage{}, err
	}
	list, total, err := s.store.ListAccounts(ctx, limit, offset)
	if err != nil {
		return AccountPage{}, fmt.Errorf("list accounts: %w", err)
	}
	return AccountPage{Accounts: list, Total: total}, nil
}

// SetRateLimit overrides the gateway's default for every key of the
// account; 0 restores the default.
func (s *Service) SetRateLimit(ctx context.Context, accountID uuid.UUID, perMinute int32) (Account, error) {
	if err := validRateLimit(perMinute); err != nil {
		return Account{}, err
	}
	a, err := s.store.SetRateLimit(ctx, accountID, perMinute)
	if err != nil {
		return Account{}, fmt.Errorf("set rate limit of account %s: %w", accountID, err)
	}
	return a, nil
}

// NewKey is the input of CreateKey.
type NewKey struct {
	AccountID   uuid.UUID
	Environment Environment
	// Name is an optional label ("booking site production").
	Name string
}

// CreateKey issues a key. The returned secret is the only copy anywhere:
// the store keeps its hash.
func (s *Service) CreateKey(ctx context.Context, in NewKey) (IssuedKey, error) {
	if !in.Environment.Valid() {
		return IssuedKey{}, invalid("environment", "must be sandbox or live")
	}
	name, err := validName("name", in.Name, false)
	if err != nil {
		return IssuedKey{}, err
	}
	if in.Environment == Live {
		// Checked before the insert, not with it: live is never switched
		// off again, so an account seen enabled stays enabled.
		a, err := s.store.Account(ctx, in.AccountID)
		if err != nil {
			return IssuedKey{}, fmt.Errorf("create key for account %s: %w", in.AccountID, err)
		}
		if !a.LiveEnabled {
			return IssuedKey{}, ErrLiveDisabled
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return IssuedKey{}, fmt.Errorf("new key id: %w", err)
	}
	secret, prefix := newSecret(in.Environment)
	k := APIKey{
		ID:          id,
		AccountID:   in.AccountID,
		Environment: in.Environment,
		Prefix:      prefix,
		Name:        name,
		CreatedAt:   input.Now(s.now),
	}
	if err := s.store.InsertKey(ctx, k, hashSecret(secret.Reveal())); err != nil {
		return IssuedKey{}, fmt.Errorf("create key for account %s: %w", in.AccountID, err)
	}
	return IssuedKey{Key: k, Secret: secret}, nil
}

// KeyPage is one page of an account's keys and the account's total
// number of keys across all pages.
type KeyPage struct {
	Keys  []APIKey
	Total int64
}

// ListKeys returns a page of the account's keys newest first (ties by id,
// so pages neither repeat nor skip a key), revoked ones included so
// partners can see when a key stopped working. page is 1..MaxPage; 0 means
// 1. limit is 1..MaxPageLimit; 0 means DefaultKeyPageLimit. An unknown
// account is ErrNotFound rather than an empty list.
func (s *Service) ListKeys(ctx context.Context, accountID uuid.UUID, page, limit int32) (KeyPage, error) {
	limit, offset, err := paging(page, limit, DefaultKeyPageLimit)
	if err != nil {
		return KeyPage{}, err
	}
	if _, err := s.store.Account(ctx, accountID); err != nil {
		return KeyPage{}, fmt.Errorf("list keys of account %s: %w", accountID, err)
	}
	keys, total, err := s.store.ListKeys(ctx, accountID, limit, offset)
	if err != nil {
		return KeyPage{}, fmt.Errorf("list keys of account %s: %w", accountID, err)
	}
	return KeyPage{Keys: keys, Total: total}, nil
}

// RevokeKey stops the key authenticating. It is idempotent: revoking again
// succeeds and keeps the first revocation time, so retries are safe and the
// audit trail is not rewritten. A key of another account is ErrNotFound.
func (s *Service) RevokeKey(ctx context.Context, accountID, keyID uuid.UUID) (APIKey, error) {
	k, err := s.store.RevokeKey(ctx, accountID, keyID, input.Now(s.now))
	if err != nil {
		return APIKey{}, fmt.Errorf("revoke key %s of account %s: %w", keyID, accountID, err)
	}
	return k, nil
}

// Authenticate resolves a presented secret to the account and environment
// of its key. Malformed, unknown and revoked secrets, and one whose prefix
// contradicts its record, all return exactly ErrUnauthenticated. Storage
// failures are returned wrapped and distinct, so callers answer them as
// outages rather than as a bad key (and never cache them as one). Neither
// the secret nor its hash appears in any error.
func (s *Service) Authenticate(ctx context.Context, presented string) (Principal, error) {
	// Garbage (scanners, truncated copies, other vendors' keys) is
	// answered without touching the database.
	if !wellFormedSecret(presented) {
		return Principal{}, ErrUnauthenticated
	}
	hash := hashSecret(presented)
	rec, err := s.store.KeyByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: look up key: %w", err)
	}
	// The index lookup already matched the hash; comparing again in constant
	// time means the decision itself never depends on a variable-time
	// comparison, whatever the storage layer did.
	if subtle.ConstantTimeCompare(rec.SecretHash, hash) != 1 || rec.Key.Revoked() {
		return Principal{}, ErrUnauthenticated
	}
	// The record decides the environment, but a secret that reads
	// "sk_sandbox_" must never be granted live (nor the reverse): partners,
	// their CI and secret scanners treat sandbox keys as harmless. Only a
	// corrupt record can disagree with its secret, and it is refused rather
	// than trusted either way.
	if !strings.HasPrefix(presented, rec.Key.Environment.SecretPrefix()) {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{
		AccountID:          rec.Key.AccountID,
		Environment:        rec.Key.Environment, // from the record, not the prefix
		KeyID:              rec.Key.ID,
		Currency:           rec.Currency,
		RateLimitPerMinute: rec.RateLimitPerMinute,
	}, nil
}

// Secret format: environment prefix, then secretRandomLength characters
// drawn uniformly from secretAlphabet. 32 characters of a 62-symbol alphabet
// carry 32 × log2(62) ≈ 190 bits, well above the 128-bit floor, and the
// alphanumeric form survives copy-paste, URLs and double-click selection.
const (
	secretAlphabet      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	secretRandomLength  = 32
	displayRandomLength = 6
)

// newSecret returns a fresh secret for env and its display prefix.
func newSecret(env Environment) (Secret, string) {
	random := randomAlphanumeric(secretRandomLength)
	secret := env.SecretPrefix() + random
	return Secret{value: &secret}, env.SecretPrefix() + random[:displayRandomLength]
}

// randomAlphanumeric draws n characters uniformly from secretAlphabet using
// crypto/rand. Bytes of 248 and above are rejected: 248 is the largest
// multiple of 62 that fits in a byte, so the kept bytes map onto the
// alphabet without modulo bias.
func randomAlphanumeric(n int) string {
	const limit = 256 - 256%len(secretAlphabet)
	out := make([]byte, 0, n)
	// About 3% of bytes are rejected; a little slack avoids a second read
	// almost always.
	buf := make([]byte, n+n/4)
	for len(out) < n {
		// crypto/rand.Read never fails; it crashes the program instead of
		// returning predictable bytes.
		_, _ = rand.Read(buf)
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			out = append(out, secretAlphabet[int(b)%len(secretAlphabet)])
			if len(out) == n {
				break
			}
		}
	}
	return string(out)
}

// hashSecret is what the store keeps and looks keys up by. A fast,
// unsalted SHA-256 is the right tool here, unlike for passwords: secrets
// carry ~190 random bits, so there is no dictionary to attack and no
// benefit from a slow KDF, while a deterministic hash allows an indexed
// lookup on every request.
func hashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// wellFormedSecret checks the shape of a presented secret only. Which
// environment the key grants is read from its record, never from here.
func wellFormedSecret(s string) bool {
	var random string
	switch {
	case strings.HasPrefix(s, Sandbox.SecretPrefix()):
		random = s[len(Sandbox.SecretPrefix()):]
	case strings.HasPrefix(s, Live.SecretPrefix()):
		random = s[len(Live.SecretPrefix()):]
	default:
		return false
	}
	if len(random) != secretRandomLength {
		return false
	}
	for i := range len(random) {
		if !strings.ContainsRune(secretAlphabet, rune(random[i])) {
			return false
		}
	}
	return true
}

// validName trims surrounding spaces and checks the name as it is stored:
// at most MaxNameLength characters (not bytes) of printable text that shows
// something (input.TextReason), since names are shown in the portal and
// the CLI, in tables of accounts or keys and in terminals. The catalogue
// holds its plans' names to the same rules.
func validName(field, name string, required bool) (string, error) {
	name = strings.TrimSpace(name)
	if reason := input.TextReason(name, MaxNameLength); reason != "" {
		return "", invalid(field, reason)
	}
	if name == "" && required {
		return "", invalid(field, "is required")
	}
	return name, nil
}

// paging checks a requested page and page size (0 means page 1 and
// defaultLimit) and returns the limit and offset to read.
func paging(page, limit, defaultLimit int32) (int32, int64, error) {
	rules := input.Pages{DefaultLimit: int(defaultLimit), MaxLimit: MaxPageLimit, MaxPage: MaxPage}
	p, field, reason := rules.Check(int(page), int(limit))
	if reason != "" {
		return 0, 0, invalid(field, reason)
	}
	// Both fit: the rules bound them far below MaxInt32.
	return int32(p.Limit), int64(p.Offset()), nil
}

func validRateLimit(perMinute int32) error {
	if perMinute < 0 || perMinute > MaxRateLimitPerMinute {
		return invalid("rate_limit_per_minute", fmt.Sprintf("must be between 0 (the gateway default) and %d", MaxRateLimitPerMinute))
	}
	return nil
}
