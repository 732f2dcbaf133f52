// Package input holds the rules more than one domain applies to what it is
// given: the display text and the page requests callers send, and the time
// its clock reads. It knows no business (no accounts, no plans) and imports
// neither transport nor storage; each domain wraps the reasons given here
// in its own validation error, naming its own field.
package input

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// TextReason returns why s is refused as a name or similar display text, or
// "" when s is fine: valid UTF-8, at most maxChars characters (not bytes),
// and printable. Names are shown in the portal, the CLI and partners'
// shops, so control characters (NUL among them, which Postgres refuses in
// text), bidirectional overrides and isolates (which reorder the text
// around them, so a name could display as something other than what it
// is) and line or paragraph separators are refused anywhere in it. The
// offending character is named ("(found U+202E)"), since it is most often
// invisible. A non-empty s must show something: at least one letter or
// digit, so that a name of only invisible characters (zero-width spaces,
// format marks) or only punctuation cannot pass as present.
//
// s is checked as given: callers trim it first if they store it trimmed.
// The empty string passes; whether a field is required is the caller's
// rule.
func TextReason(s string, maxChars int) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	n := utf8.RuneCountInString(s)
	if n > maxChars {
		return fmt.Sprintf("must be at most %d characters", maxChars)
	}
	for _, rule := range []struct {
		refused func(rune) bool
		what    string
	}{
		{unicode.IsControl, "control characters"},
		{isBidiControl, "bidirectional override or isolate characters"},
		{isLineSeparator, "line or paragraph separators"},
	} {
		if i := strings.IndexFunc(s, rule.refused); i >= 0 {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return fmt.Sprintf("must not contain %s (found U+%04X)", rule.what, r)
		}
	}
	if n > 0 && strings.IndexFunc(s, isLetterOrDigit) < 0 {
		return "must contain at least one letter or digit"
	}
	return ""
}

func isLetterOrDigit(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// isBidiControl reports the explicit directional embeddings and overrides
// (U+202A to U+202E) and the isolates (U+2066 to U+2069).
func isBidiControl(r rune) bool {
	return (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069')
}

// isLineSeparator reports U+2028 and U+2029, which are not control
// characters to Go but break a line in JavaScript strings, logs and most
// displays, as a newline would.
func isLineSeparator(r rune) bool { return unicode.In(r, unicode.Zl, unicode.Zp) }

// Pages are the paging rules of one listing.
type Pages struct {
	// DefaultLimit is the page size when the caller names none.
	DefaultLimit int
	// MaxLimit bounds the page size.
	MaxLimit int
	// MaxPage bounds the page number: Postgres reads and discards every row
	// before an OFFSET, so an unbounded page (up to MaxInt32 on the wire)
	// is a costly request for an empty answer.
	MaxPage int
}

// Page is a page request that passed its listing's rules.
type Page struct {
	// Number counts from 1.
	Number int
	Limit  int
}

// Offset is how many items come before the page. It cannot overflow: the
// rules bound both factors.
func (p Page) Offset() int { return (p.Number - 1) * p.Limit }

// Check applies the rules to a requested page number and size, 0 meaning
// page 1 and DefaultLimit. A refused request returns the field at fault
// ("page" or "limit") and the reason, the page number first.
func (r Pages) Check(number, limit int) (p Page, field, reason string) {
	if number == 0 {
		number = 1
	}
	if limit == 0 {
		limit = r.DefaultLimit
	}
	if number < 1 || number > r.MaxPage {
		return Page{}, "page", fmt.Sprintf("must be between 1 and %d", r.MaxPage)
	}
	if limit < 1 || limit > r.MaxLimit {
		return Page{}, "limit", fmt.Sprintf("must be between 1 and %d", r.MaxLimit)
	}
	return Page{Number: number, Limit: limit}, "", ""
}

// Now reads clock and returns the time as Postgres stores it (UTC, to the
// microsecond), so that what a use case returns equals what a later read
// of the same record returns.
func Now(clock func() time.Time) time.Time {
	return clock().UTC().Truncate(time.Microsecond)
}
