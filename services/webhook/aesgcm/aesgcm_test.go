package aesgcm_test

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/esimplatform/esim/services/webhook/aesgcm"
)

func newAEAD(t *testing.T) *aesgcm.AEAD {
	t.Helper()
	key := make([]byte, aesgcm.KeySize)
	_, _ = rand.Read(key)
	a, err := aesgcm.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSealOpens(t *testing.T) {
	a := newAEAD(t)
	secret := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	ad := []byte("scope A")
	one, err := a.Seal(secret, ad)
	if err != nil {
		t.Fatal(err)
	}
	two, _ := a.Seal(secret, ad)
	if bytes.Equal(one, two) {
		t.Error("two seals of one secret are equal: the nonce is not fresh")
	}
	if bytes.Contains(one, secret) || bytes.Contains(one, secret[6:]) {
		t.Error("the sealed value shows the secret")
	}
	for _, sealed := range [][]byte{one, two} {
		got, err := a.Open(sealed, ad)
		if err != nil || !bytes.Equal(got, secret) {
			t.Errorf("Open = %q, %v; want the secret", got, err)
		}
	}
}

// What Open refuses: another key, other additional data (a sealed secret
// copied onto another scope's row), a flipped bit, a cut value.
func TestOpenRefusesWhatItDidNotSeal(t *testing.T) {
	a, other := newAEAD(t), newAEAD(t)
	sealed, err := a.Seal([]byte("secret"), []byte("scope A"))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	for name, tc := range map[string]struct {
		a      *aesgcm.AEAD
		sealed []byte
		ad     string
	}{
		"another key":           {other, sealed, "scope A"},
		"other additional data": {a, sealed, "scope B"},
		"a flipped bit":         {a, flipped, "scope A"},
		"a cut value":           {a, sealed[:10], "scope A"},
		"nothing":               {a, nil, "scope A"},
		"another version":       {a, append([]byte{9}, sealed[1:]...), "scope A"},
	} {
		if got, err := tc.a.Open(tc.sealed, []byte(tc.ad)); err == nil {
			t.Errorf("%s: Open = %q, want an error", name, got)
		}
	}
}

func TestNewWantsA256BitKey(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := aesgcm.New(make([]byte, n)); err == nil {
			t.Errorf("New with a %d-byte key succeeded", n)
		}
	}
}
