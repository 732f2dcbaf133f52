// Package limits declares, once, the bounds the platform's contracts share:
// the services enforce them and the gateway's public API documents and
// checks the same numbers, so the two cannot drift apart. Constants only:
// a domain may import it without importing a transport.
package limits

// Paging of every list, internal and public (spec section 8: a page holds
// at most 100 items).
const (
	// DefaultPageLimit is the page size when a caller names none.
	DefaultPageLimit = 20
	// MaxPageLimit bounds a page's size.
	MaxPageLimit = 100
	// MaxPage bounds the page number: Postgres reads and discards every row
	// before an OFFSET, so an unbounded page is a costly request for an
	// empty answer.
	MaxPage = 10000
)

// MaxPlansPerGet bounds one catalogue GetPlans call: one query, one answer.
const MaxPlansPerGet = 100

// An order's bounds (spec section 8): ordering enforces them, the
// gateway's OpenAPI document states them.
const (
	MaxQuantity       = 50
	MaxDays           = 365
	MaxCustomerText   = 120 // customer.name and customer.reference, in characters
	MaxEmailLength    = 255
	MaxIdempotencyKey = 255 // printable ASCII characters
)
