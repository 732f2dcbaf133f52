package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

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
