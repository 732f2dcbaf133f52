// Package limits declares, once, the bounds and vocabularies the
// platform's contracts share: the services enforce them, and the gateway's
// public API and esimctl document and check the same values, so none can
// drift apart and no client imports a service. Constants and fixed lists
// only: a domain may import it without importing a transport.
package limits

import "time"

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

// The currencies the platform sells in (ISO 4217): every account has one,
// every plan a price in each.
const (
	USD = "USD"
	EUR = "EUR"
	GBP = "GBP"
)

// Currencies lists them, as accounts and lists show them.
var Currencies = []string{USD, EUR, GBP}

// MaxRateLimitPerMinute bounds an account's rate limit: a million requests
// a minute per key is about 16,700 a second, beyond what a gateway replica
// serves. Anything larger is a typo or an attempt at "unlimited", which
// the platform does not offer, and an allowance near MaxInt32 would make
// the gateway's GCRA interval (60 s / limit) a few nanoseconds.
const MaxRateLimitPerMinute = 1_000_000

// MaxPlansPerUpsert bounds one catalogue upsert, and so one plans import
// file.
const MaxPlansPerUpsert = 1000

// A wallet movement's bounds.
const (
	// MaxAmountMinor bounds one movement: top-ups are a few units each; an
	// amount beyond this is a typo (extra zeros, major units sent as
	// minor) or an attack, and answering it with invalid_argument beats
	// moving it. It also keeps sums far from int64's range: 900 million
	// movements at the cap still fit in a balance.
	MaxAmountMinor = 100_000_000_00
	// MaxReferenceLength bounds a reference, the idempotency key of a
	// movement: as long as the public API's Idempotency-Key, of which an
	// order id is much shorter.
	MaxReferenceLength = 255
	// MaxNoteLength bounds the free text an operator gives with a top-up.
	MaxNoteLength = 255
)

// The events partners receive by webhook and read in GET /v1/events.
const (
	EventOrderCompleted = "order.completed"
	EventOrderFailed    = "order.failed"
	// The eSIM after its order (data: the eSIM) and its top-ups (data:
	// the top-up).
	EventEsimInstalled  = "esim.installed"
	EventEsimActivated  = "esim.activated"
	EventEsimUsage      = "esim.usage"
	EventEsimExpiring   = "esim.expiring"
	EventEsimExpired    = "esim.expired"
	EventTopUpCompleted = "topup.completed"
	EventTopUpFailed    = "topup.failed"
	// EventPing is the test event an endpoint is sent on request.
	EventPing = "ping"
)

// EventTypes lists them.
var EventTypes = []string{
	EventOrderCompleted, EventOrderFailed,
	EventEsimInstalled, EventEsimActivated, EventEsimUsage, EventEsimExpiring, EventEsimExpired,
	EventTopUpCompleted, EventTopUpFailed,
	EventPing,
}

// The delivery rules of webhooks (the spec, section 6).
const (
	// MaxWebhookAttempts is how often an event is sent at most.
	MaxWebhookAttempts = 3
	// SecretOverlap is how long a rotated-out signing secret keeps
	// signing beside the new one, for receivers to switch over without
	// missing a delivery.
	SecretOverlap = 24 * time.Hour
)
