package accounts

import (
	"errors"
	"fmt"
)

// The accounts service's error vocabulary. Transports map these, and only
// these, to their own codes; anything else is an internal failure.
var (
	// ErrNotFound: the account or key does not exist, or belongs to another
	// account (the two are indistinguishable on purpose, so ids of other
	// partners cannot be probed).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the resource already exists (a caller-chosen account id).
	ErrConflict = errors.New("already exists")
	// ErrUnauthenticated: the presented secret is malformed, unknown or
	// revoked. One error for all three, so a caller learns nothing about
	// which keys exist.
	ErrUnauthenticated = errors.New("invalid API key")
)

// ValidationError names the input field that was rejected and why. Reasons
// are written for the caller and never echo secrets.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

func invalid(field, reason string) error {
	return &ValidationError{Field: field, Reason: reason}
}
