package catalogue

import (
	"errors"
	"fmt"
)

// ErrNotFound reports an unknown plan, or a retired one where only active
// plans may be seen. Callers must not be able to tell the two apart: a
// retired plan is "not found" when ordered (spec, section 2).
var ErrNotFound = errors.New("plan not found")

// ValidationError names the one input field that is wrong and why, so the
// public API can answer invalid_request with error.details naming it.
type ValidationError struct {
	// Field is the path of the offending field in the caller's terms, such
	// as "limit" or "plans[2].prices".
	Field string
	// Reason is a short human-readable explanation, safe to show partners.
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// InField prefixes the field of a validation error, so a rule written for
// one plan reports "plans[3].countries" when it fails inside a batch.
func InField(prefix string, err error) error {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return &ValidationError{Field: prefix + "." + ve.Field, Reason: ve.Reason}
	}
	return err
}
