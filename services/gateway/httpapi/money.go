package httpapi

import (
	"github.com/danielgtaylor/huma/v2"

	"github.com/esimplatform/esim/libs/money"
)

// Amount is money in minor units that goes on the wire as a JSON number with
// two decimals (1250 -> 12.50). It never passes through a float.
type Amount int64

// MarshalJSON writes the amount as a JSON number with two decimals.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(money.Decimal(int64(a))), nil }

// Schema documents Amount as a number, which is what clients receive.
func (Amount) Schema(huma.Registry) *huma.Schema {
	// "double", so that generators type it float64 at least: a 32-bit float
	// (what Go's oapi-codegen makes of a bare number) loses cents from
	// about 100,000.00 up.
	return &huma.Schema{Type: huma.TypeNumber, Format: "double", Description: "Amount in the currency's major unit, two decimals. Read it as a decimal, or at least a 64-bit float.", Examples: []any{12.5}}
}
