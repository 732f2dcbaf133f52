package argon2id_test

import (
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/esimplatform/esim/services/accounts/argon2id"
)

var phc = regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$([A-Za-z0-9+/]{22})\$([A-Za-z0-9+/]{43})$`)

func TestHashIsAPHCStringThatVerifies(t *testing.T) {
	h := argon2id.Hash("correct horse battery")
	m := phc.FindStringSubmatch(h)
	if m == nil {
		t.Fatalf("Hash = %q, want the PHC form with m=19456,t=2,p=1, a 16-byte salt and a 32-byte key", h)
	}
	if salt, _ := base64.RawStdEncoding.DecodeString(m[1]); len(salt) != 16 {
		t.Errorf("salt is %d bytes, want 16", len(salt))
	}
	if ok, err := argon2id.Verify("correct horse battery", h); !ok || err != nil {
		t.Errorf("Verify(the password) = %v, %v; want true", ok, err)
	}
	for _, wrong := range []string{"correct horse batterY", "", "correct horse battery "} {
		if ok, err := argon2id.Verify(wrong, h); ok || err != nil {
			t.Errorf("Verify(%q) = %v, %v; want false, nil", wrong, ok, err)
		}
	}
	if again := argon2id.Hash("correct horse battery"); again == h {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
}

// TestVerifyReadsParametersFromTheString: a hash made with other costs
// still verifies, so raising the cost later strands no user.
func TestVerifyReadsParametersFromTheString(t *testing.T) {
	// x/crypto's own Argon2id test vector ("password", "somesalt",
	// t=4, m=4096, p=4, a 24-byte key) in PHC form.
	const ref = "$argon2id$v=19$m=4096,t=4,p=4$c29tZXNhbHQ$FF25czqfTuQ+3zPFCb6WuTTVBaTvszxa"
	ok, err := argon2id.Verify("password", ref)
	if err != nil || !ok {
		t.Errorf("Verify(reference vector) = %v, %v; want true", ok, err)
	}
}

func TestVerifyRefusesMalformedAndCostlyStrings(t *testing.T) {
	good := argon2id.Hash("correct horse battery")
	salt, key := phc.FindStringSubmatch(good)[1], phc.FindStringSubmatch(good)[2]
	for _, bad := range []string{
		"",
		"plaintext",
		strings.Replace(good, "argon2id", "argon2i", 1),
		strings.Replace(good, "v=19", "v=16", 1),
		"$argon2id$v=19$m=4194304,t=2,p=1$" + salt + "$" + key, // 4 GiB
		"$argon2id$v=19$m=19456,t=1000,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=19456,t=2,p=0$" + salt + "$" + key,
		"$argon2id$v=19$t=2,m=19456,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$" + key[:10],
		"$argon2id$v=19$m=19456,t=2,p=1$!!$" + key,
		good + "$",
	} {
		if ok, err := argon2id.Verify("correct horse battery", bad); ok || !errors.Is(err, argon2id.ErrMalformed) {
			t.Errorf("Verify(%q) = %v, %v; want ErrMalformed", bad, ok, err)
		}
	}
}
