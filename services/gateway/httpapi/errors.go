package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/gateway"
)

// publicErrors is the one table from the gateway's error vocabulary to the
// public error code and HTTP status of spec section 7. The status decides
// the code one-to-one, so errors huma raises itself (bad query parameters,
// oversized bodies) land on the same codes.
var publicErrors = []struct {
	err    error
	status int
	code   string
}{
	{gateway.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{gateway.ErrUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{gateway.ErrNotFound, http.StatusNotFound, "not_found"},
	{gateway.ErrRateLimited, http.StatusTooManyRequests, "rate_limited"},
}

const internalCode = "internal_error"

func codeFor(status int) (int, string) {
	switch status {
	// huma reports unparsable or out-of-range input as 422 and oversized
	// bodies as 413; partners get one code for "fix your request".
	case http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		status = http.StatusBadRequest
	}
	for _, e := range publicErrors {
		if e.status == status {
			return status, e.code
		}
	}
	return http.StatusInternalServerError, internalCode
}

// Error is the body of every error response:
// {"error": {"code", "message", "details", "request_id"}}.
type Error struct {
	status int
	Body   ErrorBody `json:"error"`
}

// ErrorBody carries the error itself.
type ErrorBody struct {
	Code      string        `json:"code" enum:"invalid_request,unauthorized,insufficient_funds,not_found,rate_limited,provider_error,internal_error" doc:"Stable machine-readable code (spec section 7)."`
	Message   string        `json:"message" doc:"Human-readable explanation; may change."`
	Details   []FieldDetail `json:"details" doc:"Each offending field; empty when no field is at fault."`
	RequestID string        `json:"request_id" doc:"Quote it when contacting support."`
}

// FieldDetail names one offending field.
type FieldDetail struct {
	Field  string `json:"field" example:"limit"`
	Reason string `json:"reason" example:"expected number <= 100"`
}

func (e *Error) Error() string  { return e.Body.Code + ": " + e.Body.Message }
func (e *Error) GetStatus() int { return e.status }

// newError is installed as huma's error constructor, so every error the API
// writes, raised by a handler, the middleware or huma's own validation, has
// the same shape.
func newError(ctx context.Context, status int, msg string, errs ...error) *Error {
	status, code := codeFor(status)
	details := []FieldDetail{}
	for _, err := range errs {
		var d *huma.ErrorDetail
		if errors.As(err, &d) {
			details = append(details, FieldDetail{Field: fieldName(d.Location), Reason: d.Message})
		}
	}
	if code == "invalid_request" && len(details) > 0 && (msg == "" || msg == "validation failed" || msg == "Unprocessable Entity") {
		parts := make([]string, len(details))
		for i, d := range details {
			parts[i] = d.Field + ": " + d.Reason
		}
		msg = "Invalid request: " + strings.Join(parts, "; ") + "."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{status: status, Body: ErrorBody{Code: code, Message: msg, Details: details, RequestID: telemetry.RequestID(ctx)}}
}

// fieldName turns huma's "query.limit" or "body.customer.email" into the
// public field name.
func fieldName(location string) string {
	for _, prefix := range []string{"query.", "path.", "body.", "header."} {
		if rest, ok := strings.CutPrefix(location, prefix); ok {
			return rest
		}
	}
	if location == "body" {
		return "body"
	}
	return location
}

func init() {
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		return newError(context.Background(), status, msg, errs...)
	}
	huma.NewErrorWithContext = func(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		ctx := context.Background()
		if hctx != nil {
			ctx = hctx.Context()
		}
		return newError(ctx, status, msg, errs...)
	}
}

// fromDomain maps an error from the gateway's use cases to its public form.
func fromDomain(ctx context.Context, err error) error {
	var verr *gateway.ValidationError
	if errors.As(err, &verr) {
		details := make([]error, len(verr.Fields))
		for i, f := range verr.Fields {
			details[i] = &huma.ErrorDetail{Location: f.Field, Message: f.Reason}
		}
		return newError(ctx, http.StatusBadRequest, "", details...)
	}
	for _, e := range publicErrors {
		if errors.Is(err, e.err) {
			return newError(ctx, e.status, messages[e.code])
		}
	}
	return newError(ctx, http.StatusInternalServerError, internalMessage)
}

const internalMessage = "Something went wrong on our side. Retry the request; it is safe to retry."

var messages = map[string]string{
	"unauthorized":    "Missing, malformed or revoked API key. Send Authorization: Bearer <API_KEY>.",
	"not_found":       "No such resource.",
	"rate_limited":    "Too many requests. Retry after the number of seconds in Retry-After.",
	"invalid_request": "Invalid request.",
}

// AnswerPanic answers a request whose handler panicked with the contract's
// 500 internal_error and its request id; libs/httpserver logs the panic.
func AnswerPanic(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, http.StatusInternalServerError, internalMessage)
}

// writeError writes an error outside huma's handlers (unknown routes).
func writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	e := newError(r.Context(), status, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(e)
}
