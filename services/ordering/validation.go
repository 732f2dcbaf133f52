package ordering

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/mail"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

// validateNewOrder checks everything that needs no lookup, and
// fingerprints the request.
func validateNewOrder(in NewOrder) (request, error) {
	if err := validScope(&in.Scope); err != nil {
		return request{}, err
	}
	if !in.Currency.Valid() {
		return request{}, invalid("currency", "must be one of USD, EUR, GBP")
	}
	req := request{NewOrder: in, quantity: 1}
	id, err := parsePlanID(in.PlanID)
	if err != nil {
		return request{}, err
	}
	req.planID = id
	if in.Quantity != nil {
		if *in.Quantity < 1 || *in.Quantity > MaxQuantity {
			return request{}, invalid("quantity", fmt.Sprintf("must be between 1 and %d", MaxQuantity))
		}
		req.quantity = *in.Quantity
	}
	if in.Days != nil && (*in.Days < 1 || *in.Days > MaxDays) {
		return request{}, invalid("days", fmt.Sprintf("must be between 1 and %d", MaxDays))
	}
	if err := validText("customer.name", in.Customer.Name, MaxCustomerText); err != nil {
		return request{}, err
	}
	if err := validEmail(in.Customer.Email); err != nil {
		return request{}, err
	}
	if err := validText("customer.reference", in.Customer.Reference, MaxCustomerText); err != nil {
		return request{}, err
	}
	if err := validIdempotencyKey(in.IdempotencyKey); err != nil {
		return request{}, err
	}
	req.fingerprint = fingerprint(req.planID, req.quantity, in.Days, in.Customer)
	return req, nil
}

// fingerprint is the SHA-256 of what makes a request the same request: the
// plan, the quantity with its default applied, the days as sent (or their
// absence) and the customer. Each field is length-prefixed, so that no two
// different requests encode alike.
func fingerprint(planID uuid.UUID, quantity int32, days *int32, c Customer) []byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("esim.ordering.v1.CreateOrder")
	field(planID.String())
	field(strconv.Itoa(int(quantity)))
	if days == nil {
		field("-")
	} else {
		field(strconv.Itoa(int(*days)))
	}
	field(c.Name)
	field(c.Email)
	field(c.Reference)
	return h.Sum(nil)
}

func validScope(scope *Scope) error {
	if scope == nil {
		return nil
	}
	if scope.AccountID == uuid.Nil {
		return invalid("scope.account_id", "is required")
	}
	if !scope.Environment.Valid() {
		return invalid("scope.environment", "must be sandbox or live")
	}
	return nil
}

// validText checks display text as stored: it is the partner's own, kept
// as sent (a reference is matched exactly), and printable.
func validText(field, s string, maxChars int) error {
	if reason := input.TextReason(s, maxChars); reason != "" {
		return invalid(field, reason)
	}
	return nil
}

// validEmail accepts "" or one bare address as RFC 5322 writes it
// ("traveller@example.com"), not a display name or a list.
func validEmail(s string) error {
	if s == "" {
		return nil
	}
	if utf8.RuneCountInString(s) > MaxEmailLength {
		return invalid("customer.email", fmt.Sprintf("must be at most %d characters", MaxEmailLength))
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return invalid("customer.email", "must be an email address such as traveller@example.com")
	}
	return nil
}

// validIdempotencyKey accepts "" (no key) or up to MaxIdempotencyKey
// printable ASCII characters.
func validIdempotencyKey(k string) error {
	if len(k) > MaxIdempotencyKey {
		return invalid(FieldIdempotencyKey, fmt.Sprintf("must be at most %d characters", MaxIdempotencyKey))
	}
	if strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r > '~' }) {
		return invalid(FieldIdempotencyKey, "must be printable ASCII characters")
	}
	return nil
}

// paging checks a requested page and page size (0 means page 1 and
// DefaultPageLimit) and returns the limit and offset to read.
func paging(page, limit int32) (int32, int64, error) {
	rules := input.Pages{DefaultLimit: DefaultPageLimit, MaxLimit: MaxPageLimit, MaxPage: MaxPage}
	p, field, reason := rules.Check(int(page), int(limit))
	if reason != "" {
		return 0, 0, invalid(field, reason)
	}
	return int32(p.Limit), int64(p.Offset()), nil
}
