package input_test

import (
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/input"
)

func TestNowIsUTCToTheMicrosecond(t *testing.T) {
	paris := time.FixedZone("CEST", 2*60*60)
	at := time.Date(2026, 7, 14, 12, 30, 45, 123456789, paris)
	got := input.Now(func() time.Time { return at })
	if want := time.Date(2026, 7, 14, 10, 30, 45, 123456000, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Now = %v, want %v in UTC", got, want)
	}
}

func TestTextReason(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		max     int
		reason  string
	}{
		{"empty", "", 5, ""},
		{"plain", "Acme Travel", 120, ""},
		{"at the limit in characters, not bytes", strings.Repeat("é", 5), 5, ""},
		{"any script", "日本 5 GB", 120, ""},
		{"a digit amid punctuation", "— 7 —", 120, ""},
		{"a zero-width space beside a letter", "Japan\u200b 5 GB", 120, ""},
		{"a joiner", "Europe\u200d", 120, ""},
		{"too long", strings.Repeat("é", 6), 5, "must be at most 5 characters"},
		{"invalid UTF-8", "Acme\xff", 120, "must be valid UTF-8"},
		{"NUL", "Ac\x00me", 120, "must not contain control characters (found U+0000)"},
		{"escape", "Japan\x1b5 GB", 120, "must not contain control characters (found U+001B)"},
		{"newline", "Acme\nTravel", 120, "must not contain control characters (found U+000A)"},
		{"C1 control", "Acme\u0085", 120, "must not contain control characters (found U+0085)"},
		{"embedding", "Eu\u202arope", 120, "must not contain bidirectional override or isolate characters (found U+202A)"},
		{"override", "Eu\u202erope", 120, "must not contain bidirectional override or isolate characters (found U+202E)"},
		{"isolate", "Eu\u2066rope", 120, "must not contain bidirectional override or isolate characters (found U+2066)"},
		{"pop isolate", "Eu\u2069rope", 120, "must not contain bidirectional override or isolate characters (found U+2069)"},
		{"line separator", "Japan\u20285 GB", 120, "must not contain line or paragraph separators (found U+2028)"},
		{"paragraph separator", "Japan\u20295 GB", 120, "must not contain line or paragraph separators (found U+2029)"},
		{"only a zero-width space", "\u200b", 120, "must contain at least one letter or digit"},
		{"only punctuation", "--", 120, "must contain at least one letter or digit"},
		{"only spaces", "   ", 120, "must contain at least one letter or digit"},
		// The first rule broken is the one reported.
		{"too long and a control character", "\x01" + strings.Repeat("a", 5), 5, "must be at most 5 characters"},
		{"a control character before an override", "\u202e\x01", 120, "must not contain control characters (found U+0001)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := input.TextReason(tc.s, tc.max); got != tc.reason {
				t.Errorf("TextReason(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.reason)
			}
		})
	}
	// The edges of the refused ranges.
	for r, refused := range map[rune]bool{
		'\u2027': false, '\u2028': true, '\u2029': true, '\u202A': true,
		'\u202E': true, '\u202F': false, '\u2065': false, '\u2066': true,
		'\u2069': true, '\u206A': false,
	} {
		s := "a" + string(r)
		if got := input.TextReason(s, 120); (got != "") != refused {
			t.Errorf("TextReason(%q) = %q, want refused %t", s, got, refused)
		}
	}
}

func TestPagesCheck(t *testing.T) {
	rules := input.Pages{DefaultLimit: 20, MaxLimit: 100, MaxPage: 10000}
	for _, tc := range []struct {
		number, limit int
		want          input.Page
		offset        int
	}{
		{0, 0, input.Page{Number: 1, Limit: 20}, 0},
		{1, 1, input.Page{Number: 1, Limit: 1}, 0},
		{3, 0, input.Page{Number: 3, Limit: 20}, 40},
		{0, 100, input.Page{Number: 1, Limit: 100}, 0},
		{10000, 100, input.Page{Number: 10000, Limit: 100}, 999900},
	} {
		p, field, reason := rules.Check(tc.number, tc.limit)
		if p != tc.want || p.Offset() != tc.offset || field != "" || reason != "" {
			t.Errorf("Check(%d, %d) = %+v (offset %d), %q %q; want %+v (offset %d)",
				tc.number, tc.limit, p, p.Offset(), field, reason, tc.want, tc.offset)
		}
	}
	for _, tc := range []struct {
		number, limit int
		field, reason string
	}{
		{-1, 20, "page", "must be between 1 and 10000"},
		{10001, 20, "page", "must be between 1 and 10000"},
		{-1, -1, "page", "must be between 1 and 10000"},
		{1, -1, "limit", "must be between 1 and 100"},
		{0, 101, "limit", "must be between 1 and 100"},
		{1 << 40, 1 << 40, "page", "must be between 1 and 10000"},
	} {
		p, field, reason := rules.Check(tc.number, tc.limit)
		if p != (input.Page{}) || field != tc.field || reason != tc.reason {
			t.Errorf("Check(%d, %d) = %+v, %q %q; want %q %q", tc.number, tc.limit, p, field, reason, tc.field, tc.reason)
		}
	}
}
