package web

import (
	"math"
	"testing"
)

func TestStatusWords(t *testing.T) {
	for in, want := range map[string]string{
		"ALLOCATED":   "Allocated",
		"INSTALLED":   "Installed",
		"top_up":      "Top-up",
		"TOP_UP":      "Top-up",
		"topup":       "Top-up",
		"no_endpoint": "No endpoint",
		"delivered":   "Delivered",
		"debit":       "Debit",
		"":            "",
	} {
		if got := statusWord(in); got != want {
			t.Errorf("statusWord(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestThousandsSeparators(t *testing.T) {
	for _, c := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{0, "EUR", "0.00 EUR"},
		{5, "EUR", "0.05 EUR"},
		{99999, "USD", "999.99 USD"},
		{100000, "USD", "1,000.00 USD"},
		{123456789, "EUR", "1,234,567.89 EUR"},
		{-123456789, "EUR", "-1,234,567.89 EUR"},
		{100000000000, "GBP", "1,000,000,000.00 GBP"},
		{math.MinInt64, "", "-92,233,720,368,547,758.08"},
	} {
		if got := formatAmount(c.minor, c.currency); got != c.want {
			t.Errorf("formatAmount(%d, %q) = %q, want %q", c.minor, c.currency, got, c.want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1000: "-1,000", 1234567: "1,234,567", math.MinInt64: "-9,223,372,036,854,775,808"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPrettyBody(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "(empty)"},
		{" \n", "(empty)"},
		{`{"type":"ping","data":{"n":1,"list":[1,2]}}`, "{\n  \"type\": \"ping\",\n  \"data\": {\n    \"n\": 1,\n    \"list\": [\n      1,\n      2\n    ]\n  }\n}"},
		{`ok`, "ok"},
		// A response's start, cut off: shown as it came.
		{`{"received": tr`, `{"received": tr`},
		{`<html>nope</html>`, `<html>nope</html>`},
	} {
		if got := prettyBody(c.in); got != c.want {
			t.Errorf("prettyBody(%q) =\n%s\nwant\n%s", c.in, got, c.want)
		}
	}
}

func TestShortID(t *testing.T) {
	for in, want := range map[string]string{
		"0195f0c4-1c2d-7abc-8def-0000000000a1": "…000000a1",
		"evt_0195f0c41c2d7abc8def00000000b0a1": "evt_…0000b0a1",
		"8999100000000000017":                  "…00000017",
		"short":                                "short",
	} {
		if got := shortID(in); got != want {
			t.Errorf("shortID(%q) = %q, want %q", in, got, want)
		}
	}
}
