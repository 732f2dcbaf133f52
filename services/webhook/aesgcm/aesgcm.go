// Package aesgcm seals small secrets for storage with AES-256-GCM, so
// that a copy of the database (a backup, a replica, a dump in a ticket)
// holds nothing that signs: the key lives in the service's configuration
// only.
package aesgcm

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// KeySize is the key's length: 32 bytes selects AES-256.
const KeySize = 32

// version starts every sealed value, so that a later scheme (another
// cipher, a key of a rotated generation) can be told from this one.
const version byte = 1

// AEAD seals and opens with one key.
type AEAD struct{ gcm cipher.AEAD }

// New returns an AEAD over key, which must be KeySize bytes.
func New(key []byte) (*AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("aesgcm: a key of %d bytes; want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aesgcm: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("aesgcm: %w", err)
	}
	return &AEAD{gcm: gcm}, nil
}

// Seal encrypts plaintext under a fresh random nonce and authenticates it
// with additionalData, which Open must be given again: the version, the
// nonce, then the ciphertext and its tag. A 96-bit random nonce is safe
// for far more seals than secrets will ever be made under one key (2^32,
// by NIST SP 800-38D).
func (a *AEAD) Seal(plaintext, additionalData []byte) ([]byte, error) {
	nonce := make([]byte, a.gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("aesgcm: nonce: %w", err)
	}
	out := append([]byte{version}, nonce...)
	return a.gcm.Seal(out, nonce, plaintext, additionalData), nil
}

// errOpen never says more: which part failed tells an attacker nothing
// useful and a reader nothing they can act on.
var errOpen = errors.New("aesgcm: cannot open: another key, other additional data or a damaged value")

// Open decrypts what Seal made with the same key and additionalData.
func (a *AEAD) Open(sealed, additionalData []byte) ([]byte, error) {
	n := a.gcm.NonceSize()
	if len(sealed) < 1+n+a.gcm.Overhead() || sealed[0] != version {
		return nil, errOpen
	}
	plaintext, err := a.gcm.Open(nil, sealed[1:1+n], sealed[1+n:], additionalData)
	if err != nil {
		return nil, errOpen
	}
	return plaintext, nil
}
