package gateway

import (
	"errors"
	"strings"
)

// The gateway's error vocabulary. Adapters translate other services' errors
// into these; the HTTP layer maps each to one public code and status.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrNotFound     = errors.New("not found")
	ErrRateLimited  = errors.New("rate limited")
	ErrInvalid      = errors.New("invalid request")
	// ErrInsufficientFunds: the balance does not cover the order; nothing
	// was charged or stored, and the same idempotency key may be retried.
	ErrInsufficientFunds = errors.New("insufficient funds")
	// ErrProviderFailed: issuing failed and the order was refunded in full.
	ErrProviderFailed = errors.New("provider error")
)

// FieldError names one offending input and why it was refused.
type FieldError struct {
	Field  string
	Reason string
}

// ValidationError lists every offending field of a request.
type ValidationError struct {
	Fields []FieldError
}

// Invalid is the usual case, one bad field; a check that finds several
// builds the ValidationError itself, so the partner hears of all at once.
func Invalid(field, reason string) *ValidationError {
	return &ValidationError{Fields: []FieldError{{Field: field, Reason: reason}}}
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Reason
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true for every ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }
