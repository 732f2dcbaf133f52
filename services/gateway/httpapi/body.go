package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/esimplatform/esim/services/gateway"
)

// Reasons a vetted body is refused for, as the partner reads them.
const (
	reasonTwice       = "given more than once"
	reasonNotUTF8     = "must be valid UTF-8"
	reasonNameNotUTF8 = "holds a field name that is not valid UTF-8"
	reasonSurrogate   = "must be valid UTF-8: a \\u escape of a surrogate (D800 to DFFF) must be half of a pair"
	reasonWholeNumber = "must be a whole number written without a decimal point or exponent"
)

// takeBody reads the body of an operation that takes one, before huma
// decodes it, and hands huma the bytes read. Reading it here bounds the
// read by a deadline that ends with it (bodyReadTimeout): huma's own
// (Operation.BodyReadTimeout, off for every operation, see readsBodies)
// stayed set once the body was in, and net/http's background read of the
// connection then hit it and cancelled the request, cutting short any
// order that took longer. A JSON body is vetted too (vetJSON), so that
// every body of every operation is, an operation added later included.
// ok is false when the request was answered.
func (a *handlers) takeBody(ctx huma.Context) (ok bool) {
	r, _ := humago.Unwrap(ctx)
	body, reason := readBody(ctx)
	if reason != "" {
		a.fail(ctx, gateway.Invalid("body", reason))
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	media := ctx.Operation().RequestBody.Content["application/json"]
	if media == nil || !isJSON(ctx.Header("Content-Type")) {
		return true // not JSON: huma names what it wants instead
	}
	if faults := vetJSON(body, media.Schema, a.api.OpenAPI().Components.Schemas); len(faults) > 0 {
		a.fail(ctx, &gateway.ValidationError{Fields: faults})
		return false
	}
	return true
}

// bodyReadTimeout bounds the reading of a request body, as huma's default
// did.
const bodyReadTimeout = 5 * time.Second

// readsBodies leaves the reading of every operation's body to takeBody:
// huma is told not to set a deadline of its own (a negative timeout clears
// the connection's, which takeBody has cleared already).
func readsBodies(_ *huma.OpenAPI, op *huma.Operation) {
	if op.RequestBody != nil {
		op.BodyReadTimeout = -1
	}
}

// isJSON tells whether a request's Content-Type is JSON's, which huma also
// takes an absent one for.
func isJSON(contentType string) bool {
	if contentType == "" {
		return true
	}
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && media == "application/json"
}

// readBody reads a body whole, up to MaxBodyBytes, within bodyReadTimeout,
// then lifts the deadline; reason says why it could not.
func readBody(ctx huma.Context) (body []byte, reason string) {
	_ = ctx.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer func() { _ = ctx.SetReadDeadline(time.Time{}) }()
	body, err := io.ReadAll(io.LimitReader(ctx.BodyReader(), MaxBodyBytes+1))
	var netErr net.Error
	switch {
	case len(body) > MaxBodyBytes:
		// Only a body sent chunked gets here: a longer announced length was
		// refused before (overCap).
		return nil, fmt.Sprintf("sent chunked, over the limit of %d bytes (1 MiB)", MaxBodyBytes)
	case errors.As(err, &netErr) && netErr.Timeout():
		return nil, fmt.Sprintf("not received within %s", bodyReadTimeout)
	case err != nil:
		return nil, "could not be read: " + err.Error()
	}
	return body, ""
}

// vetJSON reads body as a single JSON value with jsontext, the tokenizer
// of encoding/json/v2, whose defaults refuse duplicate names and invalid
// UTF-8 and report where, and checks each number against schema: one
// that the schema wants whole must be written as digits alone. Number
// faults are collected up to the first fault of the text itself, after
// which nothing can be read.
func vetJSON(body []byte, schema *huma.Schema, reg huma.Registry) []gateway.FieldError {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	var faults []gateway.FieldError
	for {
		kind, length := dec.StackIndex(dec.StackDepth())
		expectingName := kind == '{' && length%2 == 0
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return faults // an empty body is huma's to refuse: it is required
		}
		if err != nil {
			return append(faults, textFault(dec, err, expectingName))
		}
		if tok.Kind() == '0' && strings.ContainsAny(tok.String(), ".eE") {
			ptr := dec.StackPointer()
			if s := schemaAt(reg, schema, dec, ptr); s != nil && s.Type == huma.TypeInteger {
				faults = append(faults, gateway.FieldError{Field: fieldAt(dec, ptr), Reason: reasonWholeNumber})
			}
		}
		if dec.StackDepth() > 0 {
			continue
		}
		// The value is whole; a body is one value and nothing after it
		// (jsontext would read a stream of them).
		switch _, err := dec.ReadToken(); {
		case err == io.EOF:
		case err == nil:
			faults = append(faults, gateway.FieldError{Field: "body", Reason: "not valid JSON: more than one value"})
		default:
			faults = append(faults, textFault(dec, err, false))
		}
		return faults
	}
}

// textFault names the field at fault for a jsontext error, and why.
func textFault(dec *jsontext.Decoder, err error, expectingName bool) gateway.FieldError {
	var serr *jsontext.SyntacticError
	if !errors.As(err, &serr) {
		return gateway.FieldError{Field: "body", Reason: "not valid JSON: " + err.Error()}
	}
	field := fieldAt(dec, serr.JSONPointer)
	switch {
	case errors.Is(serr.Err, jsontext.ErrDuplicateName):
		return gateway.FieldError{Field: field, Reason: reasonTwice}
	// jsontext's error values for these are internal; their words are
	// pinned with its version, and the tests would see them change.
	case serr.Err.Error() == "invalid UTF-8" && expectingName:
		// The pointer is the object's: the name was never read.
		return gateway.FieldError{Field: field, Reason: reasonNameNotUTF8}
	case serr.Err.Error() == "invalid UTF-8":
		return gateway.FieldError{Field: field, Reason: reasonNotUTF8}
	case strings.Contains(serr.Err.Error(), "surrogate"):
		return gateway.FieldError{Field: field, Reason: reasonSurrogate}
	}
	// Malformed JSON is the body's fault, wherever it lies.
	return gateway.FieldError{Field: "body", Reason: fmt.Sprintf("not valid JSON: %v, at byte %d", serr.Err, serr.ByteOffset)}
}

// fieldAt is the public name of the field ptr points to, as huma names
// the fields it refuses: customer.name, items[0].id; "body" for the
// whole. dec's stack says which levels are arrays, whose tokens are
// indexes.
func fieldAt(dec *jsontext.Decoder, ptr jsontext.Pointer) string {
	var b strings.Builder
	level := 0
	for tok := range ptr.Tokens() {
		level++
		if kind, _ := dec.StackIndex(level); kind == '[' {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if tok == "" {
			tok = `""` // as quoteEmptyNames names it
		}
		b.WriteString(tok)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// schemaAt is the schema of the value ptr points to, or nil where the
// schema says nothing of it (an unknown field, which huma refuses).
func schemaAt(reg huma.Registry, s *huma.Schema, dec *jsontext.Decoder, ptr jsontext.Pointer) *huma.Schema {
	level := 0
	for tok := range ptr.Tokens() {
		level++
		if s = resolve(reg, s); s == nil {
			return nil
		}
		if kind, _ := dec.StackIndex(level); kind == '[' {
			s = s.Items
			continue
		}
		next := s.Properties[tok]
		if next == nil {
			next, _ = s.AdditionalProperties.(*huma.Schema)
		}
		s = next
	}
	return resolve(reg, s)
}

// resolve follows s's $ref, if it has one.
func resolve(reg huma.Registry, s *huma.Schema) *huma.Schema {
	if s != nil && s.Ref != "" {
		return reg.SchemaFromRef(s.Ref)
	}
	return s
}
