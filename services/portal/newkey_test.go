package portal_test

import (
	"bytes"
	"testing"

	"github.com/esimplatform/esim/services/portal"
)

// A sealed new key opens with its key and binding only, and holds no
// part of the secret readable.
func TestSealNewKey(t *testing.T) {
	k := portal.NewKey{Name: "booking server", Secret: "sk_sandbox_0123456789abcdefghijklmnopqrstuv"}
	const binding = "portal new key\x00account\x00sandbox\x00id"
	sealed, key, err := portal.SealNewKey(k, binding)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("sk_sandbox_")) || bytes.Contains(sealed, []byte(k.Name)) {
		t.Error("the sealed value holds the key readable")
	}
	if got, err := portal.OpenNewKey(sealed, key, binding); err != nil || got != k {
		t.Fatalf("OpenNewKey = %+v, %v; want %+v", got, err, k)
	}
	_, other, _ := portal.SealNewKey(k, binding)
	damaged := bytes.Clone(sealed)
	damaged[len(damaged)-1] ^= 1
	for name, tc := range map[string]struct {
		sealed, key []byte
		binding     string
	}{
		"another key":     {sealed, other, binding},
		"another binding": {sealed, key, "portal new key\x00another account\x00sandbox\x00id"},
		"damaged":         {damaged, key, binding},
		"truncated":       {sealed[:10], key, binding},
		"a short key":     {sealed, key[:16], binding},
	} {
		if got, err := portal.OpenNewKey(tc.sealed, tc.key, tc.binding); err == nil {
			t.Errorf("%s: opened %+v", name, got)
		}
	}
	id := portal.NewKeyID()
	if !portal.ValidNewKeyID(id) || portal.NewKeyID() == id {
		t.Errorf("NewKeyID %q: not valid, or not random", id)
	}
	for _, bad := range []string{"", "nope", id[:31], id + "0", "zz" + id[2:]} {
		if portal.ValidNewKeyID(bad) {
			t.Errorf("ValidNewKeyID(%q)", bad)
		}
	}
}
