package accounts

import (
	"errors"
	"fmt"
)

// The accounts service's error vocabulary. Transports map these, and only
// these, to their own codes; anything else is an internal failure.
var (
	// ErrNotFound: the account, key or invite does not exist, or belongs to
	// another account (the two are indistinguishable on purpose, so ids of
	// other partners cannot be probed).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the resource already exists (a caller-chosen account id;
	// a registered email is the *ConflictError ErrEmailTaken).
	ErrConflict = errors.New("already exists")
	// ErrUnauthenticated: the presented secret is malformed, unknown or
	// revoked. One error for all three, so a caller learns nothing about
	// which keys exist. The portal's credentials answer it with messages
	// of their own (ErrWrongCredentials, ErrNoSession), which are it too.
	ErrUnauthenticated = errors.New("invalid API key")
	// ErrLiveDisabled: a live key for an account an operator has not yet
	// enabled live for.
	ErrLiveDisabled = errors.New("live is not enabled for this account; an operator enables it with esimctl accounts enable-live")
)

// The portal's answers to a credential it refuses. Each is ErrUnauthenticated
// (errors.Is) with a message for the person at the sign-in form.
var (
	// ErrWrongCredentials: an unknown email and a wrong password alike, so
	// the sign-in form cannot be used to learn who has an account.
	ErrWrongCredentials error = unauthenticated("email or password is incorrect")
	// ErrNoSession: a session token that is malformed, unknown, expired or
	// revoked; the portal sends its user to sign in again.
	ErrNoSession error = unauthenticated("session is unknown, expired or revoked; sign in again")
)

// ErrInviteNotFound is ErrNotFound for an invite token, worded for the
// person who followed the link.
var ErrInviteNotFound error = notFound("invite not found, used or expired")

// ErrEmailTaken: the email is already a user's. Signing in names no
// account, so an address belongs to one user on the whole platform.
var ErrEmailTaken = &ConflictError{Field: "email", Reason: "is already registered"}

// unauthenticated and notFound are messages that are ErrUnauthenticated
// and ErrNotFound to errors.Is, so the one mapping of each sentinel
// answers them with their own words.
type (
	unauthenticated string
	notFound        string
)

func (e unauthenticated) Error() string      { return string(e) }
func (unauthenticated) Is(target error) bool { return target == ErrUnauthenticated }
func (e notFound) Error() string             { return string(e) }
func (notFound) Is(target error) bool        { return target == ErrNotFound }

// ConflictError is ErrConflict (errors.Is) naming the input field whose
// value is already taken, so callers can show it next to that field.
type ConflictError struct {
	Field  string
	Reason string
}

func (e *ConflictError) Error() string { return e.Field + " " + e.Reason }

// Unwrap makes every ConflictError an ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

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
