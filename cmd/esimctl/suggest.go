package main

import (
	"slices"
	"strings"
)

// didYouMean suggests the candidates closest to a mistyped word, as
// "; did you mean "list"?", or "" when none is close: those the word
// begins (three letters at least), else the nearest within two edits
// (letters swapped, missed or doubled), so "lst" is "list", not "get".
func didYouMean(typed string, candidates []string) string {
	if typed == "" {
		return ""
	}
	word := strings.ToLower(typed)
	// One or two letters begin too many names to point at any.
	prefixOK := len(strings.TrimLeft(typed, "-")) >= 3
	best := 3
	var close []string
	for _, cand := range candidates {
		d := editDistance(word, strings.ToLower(cand))
		if prefixOK && strings.HasPrefix(strings.ToLower(cand), word) {
			d = 0
		}
		switch {
		case d > best || slices.Contains(close, `"`+cand+`"`):
		case d < best:
			best, close = d, []string{`"` + cand + `"`}
		default:
			close = append(close, `"`+cand+`"`)
		}
	}
	if best > 2 {
		return ""
	}
	return "; did you mean " + orList(close) + "?"
}

// editDistance is the Levenshtein distance of a and b, by rune.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}
