package httpapi

import (
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/esimplatform/esim/proto/partnerapi"
)

// Amount is money in minor units that goes on the wire as a JSON number
// with two decimals (partnerapi.Amount).
type Amount = partnerapi.Amount

// amountSchema documents Amount, which partnerapi declares without
// knowing huma: registerAmount has the registry describe one as the other.
type amountSchema int64

// Schema documents Amount as a number, which is what clients receive.
func (amountSchema) Schema(huma.Registry) *huma.Schema {
	// "double", so that generators type it float64 at least: a 32-bit float
	// (what Go's oapi-codegen makes of a bare number) loses cents from
	// about 100,000.00 up.
	return &huma.Schema{Type: huma.TypeNumber, Format: "double", Description: "Amount in the currency's major unit, two decimals. Read it as a decimal, or at least a 64-bit float.", Examples: []any{12.5}}
}

// registerAmount must run before the first operation is registered.
func registerAmount(api huma.API) {
	api.OpenAPI().Components.Schemas.RegisterTypeAlias(reflect.TypeFor[Amount](), reflect.TypeFor[amountSchema]())
}
