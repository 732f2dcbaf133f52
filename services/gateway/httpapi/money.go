package httpapi

import (
	"strconv"

	"github.com/danielgtaylor/huma/v2"
)

// Amount is money in minor units that goes on the wire as a JSON number with
// two decimals (1250 -> 12.50). It never passes through a float.
type Amount int64

func (a Amount) MarshalJSON() ([]byte, error) {
	v := int64(a)
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	cents := v % 100
	s := sign + strconv.FormatInt(v/100, 10) + "."
	if cents < 10 {
		s += "0"
	}
	return []byte(s + strconv.FormatInt(cents, 10)), nil
}

// Schema documents Amount as a number, which is what clients receive.
func (Amount) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeNumber, Description: "Amount in the currency's major unit, two decimals.", Examples: []any{12.5}}
}
