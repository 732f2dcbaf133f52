package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// Signing follows Standard Webhooks (www.standardwebhooks.com), so that
// partners verify deliveries with the public libraries rather than code of
// ours: each delivery carries webhook-id (the event id), webhook-timestamp
// (the attempt's time, in Unix seconds) and webhook-signature, a
// space-separated list of "v1,<base64 HMAC-SHA256 of id.timestamp.body>",
// one per secret that signs.

// SecretPrefix starts every signing secret, as Standard Webhooks spells it.
const SecretPrefix = "whsec_"

// secretBytes is a secret's length: 256 bits, HMAC-SHA256's own key size.
const secretBytes = 32

// NewSecret returns a fresh signing secret: SecretPrefix and the standard
// base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// errMalformedSecret never quotes the secret: whatever is wrong with it,
// it may still be one.
var errMalformedSecret = errors.New("malformed signing secret: want whsec_ and standard base64")

// secretKey is the HMAC key a secret stands for: the bytes its base64
// after the prefix encodes.
func secretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok || b64 == "" {
		return nil, errMalformedSecret
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errMalformedSecret
	}
	return key, nil
}

// Sign returns the webhook-signature header of a delivery of body with
// id at timestamp (Unix seconds): one "v1,<signature>" per secret, the
// current secret first, space-separated.
func Sign(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, len(secrets))
	for i, secret := range secrets {
		key, err := secretKey(secret)
		if err != nil {
			return "", err
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write(strconv.AppendInt(nil, timestamp, 10))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	return strings.Join(sigs, " "), nil
}
