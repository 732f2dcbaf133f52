// Package money writes amounts held in integer minor units, the only way
// the platform holds money, as the decimals people and partners read. It
// never goes through a float, which would round.
package money

import "fmt"

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
