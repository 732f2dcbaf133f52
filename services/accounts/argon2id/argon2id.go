// Package argon2id hashes passwords with Argon2id (RFC 9106) and encodes
// the result as a PHC string, "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>",
// the form other Argon2 libraries read, so the stored hashes outlive this
// package's choice of library.
//
// Verification reads the parameters from the stored string, not from this
// package's constants: raising the cost later leaves existing hashes
// verifiable.
package argon2id

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// The cost of a new hash: OWASP's first recommended Argon2id setting
// (19 MiB, two passes, one lane), about 30 ms of one core. Memory is the
// cost that hurts GPU attackers; more lanes would buy nothing on a service
// that verifies one password per request.
const (
	Memory      = 19 * 1024 // KiB
	Iterations  = 2
	Parallelism = 1
	SaltLength  = 16
	KeyLength   = 32
)

// Bounds on what a stored string may ask of Verify. Hashes come from this
// service's own database, but a corrupt or tampered row must not make one
// sign-in allocate gigabytes or spin for minutes.
const (
	maxMemory      = 256 * 1024 // KiB
	maxIterations  = 16
	maxParallelism = 16
	minKeyLength   = 16
	maxKeyLength   = 64
	minSaltLength  = 8
	maxSaltLength  = 64
)

// ErrMalformed is a stored string that is not an Argon2id PHC string this
// package can verify.
var ErrMalformed = errors.New("argon2id: malformed hash")

// PHC strings carry salt and key in standard base64 without padding.
var b64 = base64.RawStdEncoding

// Hash returns the PHC string of password under a fresh random salt.
func Hash(password string) string {
	salt := make([]byte, SaltLength)
	// crypto/rand.Read never fails; it crashes the program instead of
	// returning predictable bytes.
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, Iterations, Memory, Parallelism, KeyLength)
	return encode(params{memory: Memory, iterations: Iterations, parallelism: Parallelism}, salt, key)
}

// Verify reports whether password is the one encoded was made from, in
// time that does not depend on how much of the key matches. An encoded
// string it cannot read is ErrMalformed, never a mere mismatch, so a
// corrupt row shows up as a failure rather than as a wrong password.
func Verify(password, encoded string) (bool, error) {
	p, salt, key, err := decode(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.iterations, p.memory, p.parallelism, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1, nil
}

type params struct {
	memory      uint32
	iterations  uint32
	parallelism uint8
}

func encode(p params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.iterations, p.parallelism, b64.EncodeToString(salt), b64.EncodeToString(key))
}

func decode(encoded string) (params, []byte, []byte, error) {
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, key
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return params{}, nil, nil, ErrMalformed
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return params{}, nil, nil, fmt.Errorf("%w: version %q, want v=%d", ErrMalformed, parts[2], argon2.Version)
	}
	var p params
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 {
		return params{}, nil, nil, fmt.Errorf("%w: parameters %q", ErrMalformed, parts[3])
	}
	for i, want := range []struct {
		name string
		max  uint64
	}{{"m", maxMemory}, {"t", maxIterations}, {"p", maxParallelism}} {
		name, value, ok := strings.Cut(fields[i], "=")
		n, err := strconv.ParseUint(value, 10, 32)
		if !ok || name != want.name || err != nil || n < 1 || n > want.max {
			return params{}, nil, nil, fmt.Errorf("%w: parameter %q, want %s=1..%d", ErrMalformed, fields[i], want.name, want.max)
		}
		switch i {
		case 0:
			p.memory = uint32(n)
		case 1:
			p.iterations = uint32(n)
		case 2:
			p.parallelism = uint8(n)
		}
	}
	// Argon2 needs at least 8 KiB per lane.
	if p.memory < 8*uint32(p.parallelism) {
		return params{}, nil, nil, fmt.Errorf("%w: m=%d is below 8 KiB per lane", ErrMalformed, p.memory)
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < minSaltLength || len(salt) > maxSaltLength {
		return params{}, nil, nil, fmt.Errorf("%w: salt", ErrMalformed)
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < minKeyLength || len(key) > maxKeyLength {
		return params{}, nil, nil, fmt.Errorf("%w: key", ErrMalformed)
	}
	return p, salt, key, nil
}
