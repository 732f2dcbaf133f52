package money_test

import (
	"errors"
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

func TestParseDecimalReadsDigitsWithoutAFloat(t *testing.T) {
	for amount, want := range map[string]int64{
		"0": 0, "12": 1200, "12.5": 1250, "12.50": 1250, "0.05": 5, "69.10": 6910,
		// 15 whole digits: past float64's exact integers once in cents.
		"999999999999999.99": 99999999999999999,
	} {
		got, err := money.ParseDecimal(amount)
		if err != nil || got != want {
			t.Errorf("ParseDecimal(%q) = %d, %v; want %d", amount, got, err, want)
		}
	}
	for _, minor := range []int64{0, 1, 99, 100, 6910, 99999999999999999} {
		if got, err := money.ParseDecimal(money.Decimal(minor)); err != nil || got != minor {
			t.Errorf("ParseDecimal(Decimal(%d)) = %d, %v", minor, got, err)
		}
	}
}

func TestParseDecimalRefusesAllButPlainDecimals(t *testing.T) {
	for _, amount := range []string{
		"", ".", ".5", "5.", "-1", "+1", "-0.01", "1e3", "6.9e1", "12.345", "1,50", " 1", "1 ",
		"0x10", "1.5.0", "١٢", "1000000000000000", // 16 whole digits
	} {
		if got, err := money.ParseDecimal(amount); !errors.Is(err, money.ErrDecimal) {
			t.Errorf("ParseDecimal(%q) = %d, %v; want ErrDecimal", amount, got, err)
		}
	}
}
