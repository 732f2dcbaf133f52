package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/validation"

	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/services/gateway"
)

// publicErrors is the one table from the gateway's error vocabulary to the
// public error code, HTTP status and default message of spec section 7.
// Anything else is internal_error. The status decides the code one-to-one,
// so errors huma raises itself (bad query parameters, oversized bodies)
// land on the same codes.
var publicErrors = []struct {
	err     error
	status  int
	code    string
	message string
}{
	{gateway.ErrInvalid, http.StatusBadRequest, "invalid_request", "Invalid request."},
	{gateway.ErrUnauthorized, http.StatusUnauthorized, "unauthorized", "Missing, malformed or revoked API key. Send Authorization: Bearer <API_KEY>."},
	{gateway.ErrNotFound, http.StatusNotFound, "not_found", "No such resource."},
	{gateway.ErrRateLimited, http.StatusTooManyRequests, "rate_limited", "Too many requests. Retry after the number of seconds in Retry-After."},
	{gateway.ErrInsufficientFunds, http.StatusPaymentRequired, "insufficient_funds", "The balance does not cover this order; nothing was charged. Top up, then retry with the same Idempotency-Key."},
	{gateway.ErrProviderFailed, http.StatusBadGateway, "provider_error", "Issuing failed; the order was refunded in full. Place a new order with a new Idempotency-Key."},
}

const (
	internalCode    = "internal_error"
	internalMessage = "Something went wrong on our side. Retry the request; it is safe to retry."
)

// withMessage gives a public error a message of its own in place of the
// table's; the error still decides the status and code.
func withMessage(err error, msg string) error { return &messageError{err: err, msg: msg} }

type messageError struct {
	err error
	msg string
}

func (e *messageError) Error() string { return e.err.Error() + ": " + e.msg }
func (e *messageError) Unwrap() error { return e.err }

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

// ErrorBody is the contract's error object (DESIGN section 3), nested
// under "error" so a client can tell it from a success envelope by its key.
type ErrorBody struct {
	Code      string        `json:"code" enum:"invalid_request,unauthorized,insufficient_funds,not_found,rate_limited,provider_error,internal_error" doc:"Stable machine-readable code (spec section 7)."`
	Message   string        `json:"message" doc:"Human-readable explanation; may change."`
	Details   []FieldDetail `json:"details" doc:"Each offending field; empty when no field is at fault."`
	RequestID string        `json:"request_id" doc:"Quote it when contacting support."`
}

// FieldDetail names one offending field.
type FieldDetail struct {
	Field  string `json:"field" example:"limit"`
	Reason string `json:"reason" example:"want a whole number from 1 to 100"`
}

func (e *Error) Error() string  { return e.Body.Code + ": " + e.Body.Message }
func (e *Error) GetStatus() int { return e.status }

// newError is installed as huma's error constructor, so every error the API
// writes, raised by a handler, the middleware or huma's own validation, has
// the same shape.
func newError(ctx context.Context, status int, msg string, errs ...error) *Error {
	sent := status
	status, code := codeFor(status)
	faulty := map[string]bool{}
	for _, err := range errs {
		if q, ok := err.(queryFault); ok {
			faulty[q.Location] = true
		}
	}
	details := []FieldDetail{}
	for _, err := range errs {
		var d *huma.ErrorDetail
		if !errors.As(err, &d) {
			continue
		}
		if _, ok := err.(queryFault); faulty[d.Location] && !ok {
			continue
		}
		location, reason := d.Location, d.Message
		// huma names the object that lacks a property; the partner's
		// field is the property.
		if name, ok := strings.CutPrefix(reason, requiredPrefix); ok {
			location, reason = location+"."+name, "is required"
		}
		// A body sent as a form (curl -d's default) is the commonest.
		if strings.HasPrefix(reason, "unknown content type") {
			reason = "want Content-Type: application/json, not " + strings.TrimPrefix(reason, "unknown content type: ")
		}
		details = append(details, FieldDetail{Field: fieldName(location), Reason: reason})
	}
	// huma says why a body was refused whole (not JSON, too large) in its
	// message alone; the body is the field at fault.
	if len(details) == 0 && (sent == http.StatusRequestEntityTooLarge || bodyUnreadable(sent, msg)) {
		details = append(details, FieldDetail{Field: "body", Reason: msg})
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

// requiredPrefix starts huma's finding of a missing property, the
// property's name following, so that newError can name it as the field.
const requiredPrefix = "required property: "

// bodyUnreadable tells huma's answer to a body it could not decode.
func bodyUnreadable(status int, msg string) bool {
	return status == http.StatusBadRequest && strings.Contains(msg, "body")
}

// fieldName turns huma's "query.limit" or "body.customer.email" into the
// public field name.
func fieldName(location string) string {
	if rest, ok := strings.CutPrefix(location, "body."); ok {
		return quoteEmptyNames(rest)
	}
	// A parameter's name is whole, dots and all.
	for _, prefix := range []string{"query.", "path.", "header."} {
		if rest, ok := strings.CutPrefix(location, prefix); ok {
			return rest
		}
	}
	if location == "body" {
		return "body"
	}
	return location
}

// quoteEmptyNames writes a body member named "" as JSON does, so that a
// detail always names something: {"": 1} is refused as the unknown field
// "", not as a field with no name.
func quoteEmptyNames(field string) string {
	segments := strings.Split(field, ".")
	for i, s := range segments {
		if s == "" {
			segments[i] = `""`
		}
	}
	return strings.Join(segments, ".")
}

// huma's package-wide settings, made once: every error it raises takes the
// contract's shape, its findings read as the gateway's own ("want ..."),
// and its schemas say what the API sends, empty lists as [] and never
// null. The messages are read as schemas are registered, after this.
// huma's range and pattern findings never reach a partner: StrictQuery and
// listPlansInput.Resolve word those themselves.
func init() {
	huma.DefaultArrayNullable = false
	// A field spelt in another case ("Plan_ID") is an unknown field, not
	// the one it resembles: encoding/json would take it as that one.
	huma.ValidateStrictCasing = true
	validation.MsgExpectedOneOf = "want one of: %s"
	validation.MsgUnexpectedProperty = "unknown field"
	validation.MsgExpectedRequiredProperty = requiredPrefix + "%s"
	validation.MsgExpectedInteger = "want a whole number"
	validation.MsgExpectedNumber = "want a number"
	validation.MsgExpectedString = "want a string"
	validation.MsgExpectedBoolean = "want true or false"
	validation.MsgExpectedObject = "want an object"
	validation.MsgExpectedArray = "want an array"
	validation.MsgExpectedMinimumNumber = "want at least %v"
	validation.MsgExpectedMaximumNumber = "want at most %v"
	validation.MsgExpectedMinLength = "want at least %d characters"
	validation.MsgExpectedMaxLength = "want at most %d characters"
	validation.MsgExpectedRFC5322Email = "want an email address (%v)"
	validation.MsgExpectedRFC4122UUID = "want a UUID (%v)"
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

// fromDomain maps an error from the gateway's use cases to its public form,
// through publicErrors. A ValidationError's fields become the details.
func fromDomain(ctx context.Context, err error) *Error {
	for _, e := range publicErrors {
		if !errors.Is(err, e.err) {
			continue
		}
		msg := e.message
		if m, ok := errors.AsType[*messageError](err); ok {
			msg = m.msg
		}
		var details []error
		if verr, ok := errors.AsType[*gateway.ValidationError](err); ok {
			msg = "" // newError words it from the details
			for _, f := range verr.Fields {
				details = append(details, &huma.ErrorDetail{Location: f.Field, Message: f.Reason})
			}
		}
		return newError(ctx, e.status, msg, details...)
	}
	return newError(ctx, http.StatusInternalServerError, internalMessage)
}

// AnswerPanic answers a request whose handler panicked with the contract's
// 500 internal_error and its request id; libs/httpserver logs the panic.
func AnswerPanic(w http.ResponseWriter, r *http.Request) {
	writeError(w, r, errors.New("handler panicked"))
}

// writeError writes err's public form, for answers written outside huma's
// handlers and middleware.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := fromDomain(r.Context(), err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	writeJSON(w, e)
}

// writeJSON writes an answer that huma does not, escaped as huma escapes
// its own: "<" stays "<", so the raw text of a message does not depend on
// which layer answered.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
