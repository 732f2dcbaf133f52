// Package money writes amounts held in integer minor units, the only way
// the platform holds money, as the decimals people and partners read, and
// reads them back. It never goes through a float, which would round.
package money

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Decimal writes minor units with two decimals (1250 -> "12.50"), the
// minor digits of every currency the platform bills in (USD, EUR, GBP).
func Decimal(minor int64) string {
	sign := ""
	u := uint64(minor)
	if minor < 0 {
		sign = "-"
		u = -u // two's complement: correct for math.MinInt64 too, whose negation overflows int64
	}
	return fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
}

// ErrDecimal is ParseDecimal's error for anything but a plain decimal.
var ErrDecimal = errors.New("want a plain decimal amount with at most two decimals, such as 12.50")

// ParseDecimal reads an amount written with at most two decimals ("12.5",
// "12.50", "12") as minor units, from its digits alone: Decimal's inverse
// for amounts of zero and above. A sign, an exponent, a third decimal or
// more digits than fit are ErrDecimal.
func ParseDecimal(amount string) (int64, error) {
	whole, frac, hasPoint := strings.Cut(amount, ".")
	if !digits(whole) || (hasPoint && !digits(frac)) || len(frac) > 2 || len(whole) > 15 {
		return 0, ErrDecimal
	}
	frac += strings.Repeat("0", 2-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, ErrDecimal
	}
	return n, nil
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
