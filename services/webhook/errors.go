package webhook

import (
	"errors"
	"fmt"
)

// The webhook service's error vocabulary. Transports map these, and only
// these, to their own codes; anything else is an internal failure.
var (
	// ErrNotFound: the scope has no endpoint, or the event does not exist
	// or belongs to another scope (indistinguishable on purpose, so that
	// other partners' event ids cannot be probed).
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: an attempt's result came after another run of the
	// job took the delivery over (the queue deemed this one's replica
	// dead); the result is dropped, since that run recorded the attempt
	// as interrupted and went on. Internal, as are the two below: no
	// caller ever sees them.
	ErrLeaseLost = errors.New("the delivery was taken over before its attempt's result was recorded")
	// ErrScopeFull: the scope has its maximum of attempts in flight.
	ErrScopeFull = errors.New("the endpoint has its maximum of attempts in flight")
	// ErrDeliveryOver: the event is delivered or failed; no attempt is
	// left to make.
	ErrDeliveryOver = errors.New("the delivery is over")
)

// ValidationError names the input field that was rejected and why.
// Fields are named as the Twirp API spells them ("scope.account_id",
// "url").
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
