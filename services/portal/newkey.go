package portal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A new API key's secret is shown once, on a page of its own that the
// form's POST redirects to, so that reloading the page never makes
// another key. Between the two requests the secret waits in Redis sealed
// with AES-256-GCM under a key made for it alone, which only the browser
// holds (a cookie scoped to that page): Redis never holds the secret
// readable, the cookie alone opens nothing, and the page takes the sealed
// secret out of Redis as it shows it, so it shows once.

// NewKeyTTL is how long a new key's secret waits to be shown: the
// redirect is followed at once, and an unread secret should not linger.
const NewKeyTTL = 2 * time.Minute

// NewKeyIDLength is the length of a NewKeyID.
const NewKeyIDLength = 32

// NewKey is what the page of a new API key shows.
type NewKey struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
}

// NewKeys holds sealed new keys between the POST and the page.
type NewKeys interface {
	// Put keeps sealed under id for ttl.
	Put(ctx context.Context, id string, sealed []byte, ttl time.Duration) error
	// Take returns what is under id and removes it, in one step; ErrNotFound when
	// nothing is (taken already, or expired).
	Take(ctx context.Context, id string) ([]byte, error)
}

// NewKeyID names a new key's page and its sealed secret: 128 random bits
// in hex.
func NewKeyID() string {
	b := make([]byte, NewKeyIDLength/2)
	// crypto/rand.Read never fails; it crashes the program instead of
	// returning predictable bytes.
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ValidNewKeyID checks the shape of an id from a URL.
func ValidNewKeyID(id string) bool {
	_, err := hex.DecodeString(id)
	return err == nil && len(id) == NewKeyIDLength
}

// SealNewKey encrypts k under a fresh random key, bound to binding (the
// account, environment and id it was made for), and returns the sealed
// value and the key. The key seals this one value only.
func SealNewKey(k NewKey, binding string) (sealed, key []byte, err error) {
	plain, err := json.Marshal(k)
	if err != nil {
		return nil, nil, err
	}
	key = make([]byte, 32)
	_, _ = rand.Read(key)
	gcm, err := newGCM(key)
	if err != nil {
		return nil, nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	return gcm.Seal(nonce, nonce, plain, []byte(binding)), key, nil
}

// errOpen says nothing of which part failed: no one can act on it.
var errOpen = errors.New("cannot open the new key: another key or binding, or a damaged value")

// OpenNewKey decrypts what SealNewKey made with key and binding.
func OpenNewKey(sealed, key []byte, binding string) (NewKey, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return NewKey{}, errOpen
	}
	n := gcm.NonceSize()
	if len(sealed) < n+gcm.Overhead() {
		return NewKey{}, errOpen
	}
	plain, err := gcm.Open(nil, sealed[:n], sealed[n:], []byte(binding))
	if err != nil {
		return NewKey{}, errOpen
	}
	var k NewKey
	if err := json.Unmarshal(plain, &k); err != nil {
		return NewKey{}, errOpen
	}
	return k, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("a key of %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
