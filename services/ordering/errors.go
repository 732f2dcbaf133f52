package ordering

import (
	"errors"
	"fmt"
)

// The ordering service's error vocabulary. Transports map these, and only
// these, to their own codes; anything else is an internal failure.
var (
	// ErrNotFound: the order, eSIM, QR token or plan does not exist, or
	// belongs to another account or environment (indistinguishable on
	// purpose, so that ids of other partners cannot be probed). A plan that
	// is retired, or not priced in the order's currency, is not found too.
	ErrNotFound = errors.New("not found")
	// ErrInsufficientFunds: the balance does not cover the order's total.
	// Nothing was charged and nothing stored: the same idempotency key goes
	// through after a top-up.
	ErrInsufficientFunds = errors.New("insufficient funds")
	// ErrProviderFailed: a provider's definitive refusal to issue an
	// order's profiles (an outage it reports, a trigger of the sandbox, no
	// provider for the environment). Providers wrap it with a message fit
	// for the partner; the order fails and is refunded. It never reaches a
	// caller as an error: CreateOrder answers the FAILED order.
	ErrProviderFailed = errors.New("the provider could not issue the eSIMs")
	// ErrICCIDInUse: a provider issued a profile whose ICCID an eSIM
	// already has, which only an SM-DP+ that lost its state does. The
	// order fails and is refunded; the profile is not given back, since
	// it is another eSIM's.
	ErrICCIDInUse = errors.New("the provider issued an ICCID another eSIM has")
	// ErrBusy: the order of this idempotency key was still being
	// processed by another call when the wait for it ran out (LockWait).
	// Nothing changed for this call; the same key, retried, replays or
	// resumes that order.
	ErrBusy = errors.New("another call is still processing the order of this idempotency key; retry with the same key")
	// ErrTooManyInFlight: the account already has as many orders in
	// flight in this environment as it may (MaxInFlight). Nothing was
	// charged and nothing stored; the same key goes through later.
	ErrTooManyInFlight = errors.New("too many orders of this account are in flight in this environment; retry shortly")
	// ErrEsimExpired: a top-up's eSIM expired between its purchase and
	// its completion. The top-up fails and is refunded.
	ErrEsimExpired = errors.New("the eSIM expired before the top-up could be applied")
	// ErrConflict: a store found the idempotency key taken by another
	// order. Under the key's lock it cannot happen; it is an internal
	// failure if it does.
	ErrConflict = errors.New("already exists")
	// ErrIdempotencyMismatch: the idempotency key was used before with a
	// different request. Nothing was charged. It is a validation error
	// naming the header, so every transport reports it as the caller's
	// mistake on Idempotency-Key.
	ErrIdempotencyMismatch error = &ValidationError{
		Field:  FieldIdempotencyKey,
		Reason: "was already used with a different request; send a new key for a new order",
	}
)

// ValidationError names the input field that was rejected and why. Fields
// are named as the public API spells them ("customer.email",
// "Idempotency-Key"); reasons are written for the caller.
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
