package money_test

import (
	"math"
	"testing"

	"github.com/esimplatform/esim/libs/money"
)

func TestDecimalHasTwoDecimalsWithoutRounding(t *testing.T) {
	for minor, want := range map[int64]string{
		0: "0.00", 5: "0.05", 199: "1.99", 1250: "12.50", 100000: "1000.00",
		-1: "-0.01", -12345: "-123.45",
		// Past float64's exact integers (2^53): a float would round these.
		math.MaxInt64: "92233720368547758.07",
		math.MinInt64: "-92233720368547758.08",
	} {
		if got := money.Decimal(minor); got != want {
			t.Errorf("Decimal(%d) = %q, want %q", minor, got, want)
		}
	}
}
