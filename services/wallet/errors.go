package wallet

import (
	"errors"
	"fmt"
)

// The wallet service's error vocabulary. Transports map these, and only
// these, to their own codes; anything else is an internal failure.
var (
	// ErrNotFound: there is no debit with the reference to refund in the
	// account and environment (one of another account or environment is
	// indistinguishable from none, on purpose).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the reference was used, for a movement of the same kind
	// in the same account and environment, with another amount or
	// currency. Nothing moved.
	ErrConflict = errors.New("already exists")
	// ErrInsufficientFunds: the balance does not cover the debit. Nothing
	// was stored, so the same reference may debit after a top-up.
	ErrInsufficientFunds = errors.New("insufficient funds")
)

// ValidationError names the input field that was rejected and why.
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

// CurrencyMismatch is the error for a call naming another currency than
// the one the balance is held in, which its first top-up fixed: a
// validation error on currency, since the caller can only fix its request.
// Stores return it; it is here so that every path words it the same.
func CurrencyMismatch(held Currency) error {
	return invalid("currency", fmt.Sprintf("must be %s, the currency the balance is held in", held))
}
