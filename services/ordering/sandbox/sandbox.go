// Package sandbox is the provider of the sandbox environment: it issues
// eSIM profiles in-process, reaching nothing outside the platform, shaped
// like real ones (19-digit ICCIDs with a Luhn check digit, unguessable
// matching ids) and pointing at an SM-DP+ address that does not exist.
package sandbox

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/services/ordering"
)

// ProviderErrorReference is the customer.reference that makes the sandbox
// fail to issue, so partners can test their handling of a provider error
// as they test a declined card with a test card number.
const ProviderErrorReference = "sandbox:provider_error"

// DefaultSMDPAddress is the SM-DP+ address of sandbox profiles: under
// .invalid, which RFC 6761 reserves never to resolve, so that a sandbox
// QR code scanned by a real phone can reach no server, now or ever, and no
// one can register the name.
const DefaultSMDPAddress = "smdp.sandbox.esim.invalid"

// Allocation is a profile the sandbox gave one position of an order.
type Allocation struct {
	Position   int32
	Serial     int64
	MatchingID string
}

// Store records what the sandbox allocated, in ordering's database.
type Store interface {
	// AllocateSandboxProfiles allocates positions 0 to len(matchingIDs)-1
	// of the order, each with a fresh serial and its matching id, unless
	// already allocated; it returns every allocation of the order by
	// position. Allocating again changes nothing.
	AllocateSandboxProfiles(ctx context.Context, orderID uuid.UUID, matchingIDs []string) ([]Allocation, error)
}

// Provider implements ordering.Provider for the sandbox.
type Provider struct {
	records func(tx ordering.Locked) Store
	smdp    string
}

var _ ordering.Provider = (*Provider)(nil)

// New returns the sandbox provider, handing out smdpAddress and recording
// its allocations where records says for the holder of an order's lock:
// on its connection, so they are written as the order moves.
func New(records func(tx ordering.Locked) Store, smdpAddress string) *Provider {
	return &Provider{records: records, smdp: smdpAddress}
}

var _ ordering.Checker = (*Provider)(nil)

// Check implements ordering.Checker: the sandbox is in-process.
func (p *Provider) Check(context.Context) (string, error) {
	return "the sandbox issues in-process and reaches nothing outside the platform", nil
}

// Describe implements ordering.Checker.
func (p *Provider) Describe() (string, string) { return "sandbox", p.smdp }

// Issue implements ordering.Provider. It is idempotent by order id: the
// allocations are recorded, and an order issued again gets them back.
func (p *Provider) Issue(ctx context.Context, tx ordering.Locked, req ordering.IssueRequest) ([]ordering.Profile, error) {
	if req.CustomerReference == ProviderErrorReference {
		return nil, fmt.Errorf("%w: the sandbox was asked to fail by customer.reference %s", ordering.ErrProviderFailed, ProviderErrorReference)
	}
	ids := make([]string, req.Quantity)
	for i := range ids {
		ids[i] = NewMatchingID()
	}
	allocs, err := p.records(tx).AllocateSandboxProfiles(ctx, req.OrderID, ids)
	if err != nil {
		return nil, fmt.Errorf("sandbox: allocate %d profiles for order %s: %w", req.Quantity, req.OrderID, err)
	}
	if len(allocs) != int(req.Quantity) {
		return nil, fmt.Errorf("sandbox: order %s has %d profiles allocated, not %d", req.OrderID, len(allocs), req.Quantity)
	}
	profiles := make([]ordering.Profile, len(allocs))
	for i, a := range allocs {
		profiles[i] = ordering.Profile{ICCID: ICCID(a.Serial), MatchingID: a.MatchingID, SMDPAddress: p.smdp}
	}
	return profiles, nil
}

// MaxSerial is the largest serial an ICCID has room for.
const MaxSerial = 99_999_999_999_999

// ICCID is the sandbox ICCID of serial (1 to MaxSerial): 89
// (telecommunications), 99 (no country's code, so never a real card's),
// the serial in 14 digits, and the Luhn check digit: 19 digits.
func ICCID(serial int64) string {
	body := fmt.Sprintf("8999%014d", serial)
	for d := byte('0'); d <= '9'; d++ {
		if ordering.LuhnValid(body + string(d)) {
			return body + string(d)
		}
	}
	panic("unreachable: one of ten digits is the Luhn check digit")
}

// Matching ids: 25 characters drawn uniformly from 36, about 129 bits, in
// five groups of five for reading out and typing in.
const (
	matchingAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	matchingLength   = 25
	matchingGroup    = 5
)

// NewMatchingID returns an unguessable matching id such as
// "K3V9Q-7ZLMA-0P2XC-J8R4T-WN5BD".
func NewMatchingID() string {
	// Bytes of 252 and above are rejected: 252 is the largest multiple
	// of 36 that fits in a byte, so the kept bytes map onto the alphabet
	// without modulo bias.
	const limit = 256 - 256%len(matchingAlphabet)
	var b strings.Builder
	buf := make([]byte, matchingLength*2)
	n := 0
	for n < matchingLength {
		_, _ = rand.Read(buf) // never fails (crypto/rand)
		for _, c := range buf {
			if int(c) >= limit || n == matchingLength {
				continue
			}
			if n > 0 && n%matchingGroup == 0 {
				b.WriteByte('-')
			}
			b.WriteByte(matchingAlphabet[int(c)%len(matchingAlphabet)])
			n++
		}
	}
	return b.String()
}
