package httpapi

import "testing"

func TestAmountHasTwoDecimals(t *testing.T) {
	for minor, want := range map[int64]string{0: "0.00", 5: "0.05", 1250: "12.50", 199: "1.99", 100000: "1000.00", -1: "-0.01", -12345: "-123.45"} {
		got, _ := Amount(minor).MarshalJSON()
		if string(got) != want {
			t.Errorf("Amount(%d) = %s, want %s", minor, got, want)
		}
	}
}

func TestFieldNameDropsTheLocation(t *testing.T) {
	for in, want := range map[string]string{"query.limit": "limit", "body.customer.email": "customer.email", "path.id": "id", "country": "country"} {
		if got := fieldName(in); got != want {
			t.Errorf("fieldName(%q) = %q, want %q", in, got, want)
		}
	}
}
