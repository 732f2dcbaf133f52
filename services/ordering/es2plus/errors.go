package es2plus

import (
	"errors"
	"fmt"
	"strings"
)

// The categories of a call that did not end in an answer from the SM-DP+.
// A *CallError wraps exactly one of them, so errors.Is tells them apart.
//
// Only a *FunctionError is a definitive refusal: the SM-DP+ read the call
// and answered that it did not execute it. Every other failed call leaves
// the outcome unknown: the SM-DP+ may have executed it (reserved or
// released a profile) before the answer was lost or mangled, so a caller
// must treat it as possibly done, for example by cancelling the ICCID it
// may have reserved. ErrInvalidRequest is the exception: nothing was sent.
var (
	// ErrTimeout: the call's deadline (the caller's context or the
	// client's Timeout) passed before a complete answer arrived.
	ErrTimeout = errors.New("es2plus: timeout")
	// ErrTransport: the connection could not be made or broke (dial, TLS
	// handshake, including an SM-DP+ certificate the CA does not sign,
	// reset).
	ErrTransport = errors.New("es2plus: transport error")
	// ErrProtocol: an answer arrived that is not a valid ES2+ response
	// (not HTTP 200, not JSON, too large, no execution status, an
	// unknown status, a mandatory field missing, an invalid ICCID).
	ErrProtocol = errors.New("es2plus: protocol error")
	// ErrCanceled: the caller's context was cancelled during the call.
	ErrCanceled = errors.New("es2plus: canceled")
	// ErrInvalidRequest: the request was refused before anything was
	// sent (a mandatory field is empty, or a field is not valid UTF-8).
	ErrInvalidRequest = errors.New("es2plus: invalid request")
)

// FunctionError is the SM-DP+'s answer "Failed" to a function call: a
// definitive business refusal (nothing was executed), with the status
// codes of SGP.22.
type FunctionError struct {
	Function               string
	FunctionCallIdentifier string
	// Status is StatusFailed or StatusExpired: both are refusals.
	Status            string
	SubjectCode       string
	ReasonCode        string
	SubjectIdentifier string
	Message           string
}

func (e *FunctionError) Error() string {
	var b strings.Builder
	status := e.Status
	if status == "" {
		status = StatusFailed
	}
	fmt.Fprintf(&b, "es2plus %s: %s", e.Function, status)
	if e.SubjectCode != "" || e.ReasonCode != "" {
		fmt.Fprintf(&b, " %s/%s", e.SubjectCode, e.ReasonCode)
	}
	if e.SubjectIdentifier != "" {
		fmt.Fprintf(&b, " (%s)", clip(e.SubjectIdentifier, 64))
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", clip(e.Message, 200))
	}
	return b.String()
}

// CallError is a call that ended without an answer from the SM-DP+ (or
// with one that is not ES2+). Kind is one of the Err* categories above.
type CallError struct {
	Function               string
	FunctionCallIdentifier string
	Kind                   error
	Err                    error
}

func (e *CallError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("es2plus %s: %v", e.Function, e.Kind)
	}
	return fmt.Sprintf("es2plus %s: %v: %v", e.Function, e.Kind, e.Err)
}

func (e *CallError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Outcomes of Outcome besides "failed:<subject>/<reason>".
const (
	OutcomeSuccess        = "success"
	OutcomeTimeout        = "timeout"
	OutcomeTransportError = "transport_error"
	OutcomeProtocolError  = "protocol_error"
	OutcomeCanceled       = "canceled"
	OutcomeInvalidRequest = "invalid_request"
	OutcomeError          = "error"
	// OutcomeExpired: the SM-DP+ answered Expired (the function's
	// validity ran out before it executed): a refusal.
	OutcomeExpired = "expired"
)

// Outcome names the result of a call for metrics and spans: "success",
// "failed:<subjectCode>/<reasonCode>" ("failed:other/other" without
// codes), "expired", "timeout", "transport_error",
// "protocol_error", "canceled", "invalid_request", or "error" for an error
// this package did not make.
func Outcome(err error) string {
	if err == nil {
		return OutcomeSuccess
	}
	var fe *FunctionError
	if errors.As(err, &fe) {
		// The codes come from the server: bounding them keeps a
		// misbehaving SM-DP+ from blowing up the metric's cardinality.
		if fe.Status == StatusExpired {
			return OutcomeExpired
		}
		return "failed:" + statusCode(fe.SubjectCode) + "/" + statusCode(fe.ReasonCode)
	}
	switch {
	case errors.Is(err, ErrTimeout):
		return OutcomeTimeout
	case errors.Is(err, ErrTransport):
		return OutcomeTransportError
	case errors.Is(err, ErrProtocol):
		return OutcomeProtocolError
	case errors.Is(err, ErrCanceled):
		return OutcomeCanceled
	case errors.Is(err, ErrInvalidRequest):
		return OutcomeInvalidRequest
	}
	return OutcomeError
}

// IsDefinitive reports whether err (from a call of this package) says for
// certain what the SM-DP+ did: nil (executed), a *FunctionError (not
// executed) or ErrInvalidRequest (never sent). Any other error leaves the
// outcome unknown.
func IsDefinitive(err error) bool {
	if err == nil || errors.Is(err, ErrInvalidRequest) {
		return true
	}
	var fe *FunctionError
	return errors.As(err, &fe)
}

// statusCode keeps an SGP.22 status code (digits and dots, such as
// "8.2.1") as it is and replaces anything else.
func statusCode(s string) string {
	if s == "" || len(s) > 16 {
		return "other"
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return "other"
		}
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary so the message stays valid UTF-8.
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
