package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/esimplatform/esim/libs/money"
)

// statusWords are the words whose plain spelling is not just the value
// with its first letter capitalised.
var statusWords = map[string]string{
	"top_up":      "Top-up",
	"topup":       "Top-up",
	"no_endpoint": "No endpoint",
}

// statusWord writes a status or kind as a person reads it: ALLOCATED is
// "Allocated", top_up "Top-up", no_endpoint "No endpoint".
func statusWord(v string) string {
	lower := strings.ToLower(strings.TrimSpace(v))
	if w, ok := statusWords[lower]; ok {
		return w
	}
	lower = strings.ReplaceAll(lower, "_", " ")
	r, size := utf8.DecodeRuneInString(lower)
	if size == 0 {
		return ""
	}
	return string(unicode.ToUpper(r)) + lower[size:]
}

// grouped writes an integer with its digits in groups of three, split
// by commas: 1234567 is "1,234,567".
func grouped(n int64) string { return group(strconv.FormatInt(n, 10)) }

// formatAmount writes minor units with two decimals, thousands grouped, and the
// currency code: 123456789 EUR is "1,234,567.89 EUR".
func formatAmount(minor int64, currency string) string {
	s := group(money.Decimal(minor))
	if currency != "" {
		s += " " + currency
	}
	return s
}

// group puts commas between the groups of three digits of a number's
// whole part, written as strconv or money.Decimal write it.
func group(number string) string {
	sign, rest := "", number
	if strings.HasPrefix(rest, "-") {
		sign, rest = "-", rest[1:]
	}
	whole, frac, hasFrac := strings.Cut(rest, ".")
	var b strings.Builder
	b.WriteString(sign)
	for i := range len(whole) {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(whole[i])
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return b.String()
}

// Empty is what a body with nothing in it is shown as.
const Empty = "(empty)"

// prettyBody writes a payload or a response body for reading: JSON
// indented, anything else (text, a cut-off JSON start) as it came, and
// nothing at all (or only blanks) as "(empty)".
func prettyBody(body string) string {
	if strings.TrimSpace(body) == "" {
		return Empty
	}
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(body), "", "  "); err != nil {
		return body
	}
	return out.String()
}

// shortID is the end of a long id, enough to tell ids apart on a page
// and to find the whole one by: its last 8 characters, where UUIDv7s and
// event ids are random (their start is a timestamp, the same for ids made
// minutes apart) and ICCIDs are their serial. An event's keeps its evt_.
func shortID(id string) string {
	const keep = 8
	prefix := ""
	if strings.HasPrefix(id, "evt_") {
		prefix, id = "evt_", id[len("evt_"):]
	}
	if len(id) <= keep+2 {
		return prefix + id
	}
	return prefix + "…" + id[len(id)-keep:]
}

// groupedAny is grouped for the integer types templates hold.
func groupedAny(n any) string {
	switch v := n.(type) {
	case int:
		return grouped(int64(v))
	case int32:
		return grouped(int64(v))
	case int64:
		return grouped(v)
	}
	return fmt.Sprint(n)
}
