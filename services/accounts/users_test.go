package accounts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/accounts/argon2id"
)

func TestValidEmail(t *testing.T) {
	for in, want := range map[string]string{
		"ann@example.com":        "ann@example.com",
		"  Ann@Example.COM ":     "ann@example.com",
		"a.b+tag@sub.example.io": "a.b+tag@sub.example.io",
	} {
		if got, err := validEmail("email", in); err != nil || got != want {
			t.Errorf("validEmail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 186) + ".com" // 255
	for _, bad := range []string{"", " ", "ann", "ann@", "@example.com", "Ann <ann@example.com>", "<ann@example.com>",
		"ann@example.com, bob@example.com", `"ann smith"@example.com`, long} {
		_, err := validEmail("email", bad)
		if ve, ok := errors.AsType[*ValidationError](err); !ok || ve.Field != "email" {
			t.Errorf("validEmail(%q) = %v, want a ValidationError on email", bad, err)
		}
	}
}

func TestValidPasswordCountsCharacters(t *testing.T) {
	for _, ok := range []string{strings.Repeat("a", 10), strings.Repeat("é", 10), strings.Repeat("x", 128), "  spaces   "} {
		if err := validPassword("password", ok); err != nil {
			t.Errorf("validPassword(%d runes) = %v", len([]rune(ok)), err)
		}
	}
	for _, bad := range []string{"", "short", strings.Repeat("a", 9), strings.Repeat("x", 129), strings.Repeat("é", 129)} {
		err := validPassword("password", bad)
		if ve, ok := errors.AsType[*ValidationError](err); !ok || ve.Field != "password" {
			t.Errorf("validPassword(%d runes) = %v, want a ValidationError on password", len([]rune(bad)), err)
		}
	}
}

func TestTokens(t *testing.T) {
	for _, prefix := range []string{sessionTokenPrefix, inviteTokenPrefix} {
		token, hash := newToken(prefix)
		text := token.Reveal()
		if !strings.HasPrefix(text, prefix) || len(text) != len(prefix)+43 || strings.ContainsAny(text, "+/=") {
			t.Errorf("token %q: want %s and 43 base64url characters", text, prefix)
		}
		if !wellFormedToken(prefix, text) || string(hash) != string(hashSecret(text)) {
			t.Errorf("token %q is not well formed, or its hash is not SHA-256 of it", text)
		}
		other, _ := newToken(prefix)
		if other.Reveal() == text {
			t.Error("two tokens are equal")
		}
		for _, bad := range []string{"", prefix, text + "A", text[:len(text)-1], strings.ToUpper(prefix) + text[len(prefix):], "sk_live_" + text[len(prefix):], text[:len(text)-1] + "="} {
			if wellFormedToken(prefix, bad) {
				t.Errorf("wellFormedToken(%q) = true", bad)
			}
		}
	}
	if wellFormedToken(sessionTokenPrefix, mustToken(inviteTokenPrefix)) {
		t.Error("an invite token passes for a session token")
	}
}

func mustToken(prefix string) string {
	s, _ := newToken(prefix)
	return s.Reveal()
}

// TestDummyHashCostsWhatARealOneDoes: the hash an unknown email is checked
// against must take as long as a user's, so its parameters are those of
// new hashes.
func TestDummyHashCostsWhatARealOneDoes(t *testing.T) {
	real := argon2id.Hash("some password")
	params := func(h string) string { return strings.Join(strings.Split(h, "$")[:4], "$") }
	if params(dummyPasswordHash) != params(real) {
		t.Errorf("dummy hash parameters %q, new hashes %q", params(dummyPasswordHash), params(real))
	}
	if _, err := argon2id.Verify("x", dummyPasswordHash); err != nil {
		t.Errorf("the dummy hash does not verify: %v", err)
	}
}

// TestPortalValidationComesFirst: input errors are answered before any
// store call (memStore refuses them all).
func TestPortalValidationComesFirst(t *testing.T) {
	ctx := context.Background()
	svc := NewService(newMemStore())
	for _, tc := range []struct {
		in    SignUp
		field string
	}{
		{SignUp{Email: "nope", Password: "long enough pw", AccountName: "Acme"}, "email"},
		{SignUp{Email: "a@example.com", Password: "short", AccountName: "Acme"}, "password"},
		{SignUp{Email: "a@example.com", Password: "long enough pw", AccountName: " "}, "account_name"},
		{SignUp{Email: "a@example.com", Password: "long enough pw", AccountName: "Acme", Currency: "JPY"}, "currency"},
	} {
		_, err := svc.SignUp(ctx, tc.in)
		if ve, ok := errors.AsType[*ValidationError](err); !ok || ve.Field != tc.field {
			t.Errorf("SignUp(%+v) = %v, want a ValidationError on %s", tc.in, err, tc.field)
		}
	}
	// A malformed email signs in as badly as an unknown one.
	if _, err := svc.SignIn(ctx, "not an email", "whatever12345"); !errors.Is(err, ErrWrongCredentials) || !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("SignIn(malformed email) = %v, want ErrWrongCredentials", err)
	}
	for _, token := range []string{"", "ps_short", mustToken(inviteTokenPrefix)} {
		if _, err := svc.GetSession(ctx, token); !errors.Is(err, ErrNoSession) {
			t.Errorf("GetSession(%q) = %v, want ErrNoSession", token, err)
		}
	}
	if _, err := svc.AcceptInvite(ctx, mustToken(sessionTokenPrefix), "long enough pw"); !errors.Is(err, ErrInviteNotFound) || !errors.Is(err, ErrNotFound) {
		t.Errorf("AcceptInvite(a session token) = %v, want ErrInviteNotFound", err)
	}
}

func TestSecretsOfThePortalNeverPrint(t *testing.T) {
	token, _ := newToken(sessionTokenPrefix)
	printed := fmt.Sprintf("%v %+v %s", IssuedSession{Token: token}, IssuedInvite{Token: token}, token)
	if strings.Contains(printed, token.Reveal()) {
		t.Errorf("a token printed itself: %s", printed)
	}
}

// inviteStore keeps invites for TestInviteIsLookedUpBeforeHashing and
// records, in order, the calls that matter: "lookup", "hash" (the
// Service's password hash) and "accept".
type inviteStore struct {
	*memStore
	invites map[string]StoredInvite
	calls   []string
	fail    error
}

func (m *inviteStore) Invite(_ context.Context, tokenHash []byte) (StoredInvite, error) {
	m.calls = append(m.calls, "lookup")
	if m.fail != nil {
		return StoredInvite{}, m.fail
	}
	inv, ok := m.invites[string(tokenHash)]
	if !ok {
		return StoredInvite{}, ErrNotFound
	}
	return inv, nil
}

func (m *inviteStore) AcceptInvite(_ context.Context, a Acceptance) (User, error) {
	m.calls = append(m.calls, "accept")
	inv := m.invites[string(a.TokenHash)]
	return User{ID: a.NewUserID, AccountID: inv.AccountID, Email: inv.Email}, nil
}

// An invite token that is unknown, used or expired is refused before the
// password is hashed: no one without a live invite gets to spend 19 MiB
// of argon2id on the service.
func TestInviteIsLookedUpBeforeHashing(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	store := &inviteStore{memStore: newMemStore(), invites: map[string]StoredInvite{}}
	svc := NewService(store, WithClock(func() time.Time { return now }))
	svc.hashPassword = func(p string) string {
		store.calls = append(store.calls, "hash")
		return "hash of " + p
	}
	account, err := svc.CreateAccount(ctx, NewAccount{Name: "Inviting Co"})
	if err != nil {
		t.Fatal(err)
	}
	invite := func(expires time.Time, used *time.Time) string {
		token := mustToken(inviteTokenPrefix)
		store.invites[string(hashSecret(token))] = StoredInvite{
			InviteRecord: InviteRecord{TokenHash: hashSecret(token), AccountID: account.ID, Email: "ann@example.com", CreatedAt: now.Add(-time.Hour), ExpiresAt: expires},
			UsedAt:       used,
		}
		return token
	}
	earlier := now.Add(-time.Minute)
	for name, token := range map[string]string{
		"unknown": mustToken(inviteTokenPrefix),
		"used":    invite(now.Add(time.Hour), &earlier),
		"expired": invite(now, nil),
	} {
		store.calls = nil
		if _, err := svc.AcceptInvite(ctx, token, "long enough pw"); !errors.Is(err, ErrInviteNotFound) {
			t.Errorf("%s invite: %v, want ErrInviteNotFound", name, err)
		}
		if !slices.Equal(store.calls, []string{"lookup"}) {
			t.Errorf("%s invite: calls %v, want the lookup alone (no hash)", name, store.calls)
		}
	}
	store.calls, store.fail = nil, errors.New("database down")
	if _, err := svc.AcceptInvite(ctx, invite(now.Add(time.Hour), nil), "long enough pw"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("invite lookup failing: %v, want the store's error", err)
	}
	if !slices.Equal(store.calls, []string{"lookup"}) {
		t.Errorf("invite lookup failing: calls %v, want no hash", store.calls)
	}

	// A live invite: looked up, then hashed, then spent.
	store.calls, store.fail = nil, nil
	got, err := svc.AcceptInvite(ctx, invite(now.Add(time.Nanosecond), nil), "long enough pw")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(store.calls, []string{"lookup", "hash", "accept"}) {
		t.Errorf("a live invite: calls %v, want lookup, hash, accept", store.calls)
	}
	if got.Session.Account.ID != account.ID || got.Token.Reveal() == "" {
		t.Errorf("a live invite: %+v", got.Session)
	}
}
